/* The level_zero.graph stream (document 002 applied to Level Zero): one
 * graph, a node per appended command keyed by the program's call site,
 * edges for list order, the events a command waits for and barriers;
 * when a command that signals an event has run (seen at the program's
 * next synchronization), its device time from the event's kernel
 * timestamps as an xptrace timed slice on its queue's track, plus
 * task_begin/task_end.  A command appended without a signal event gets
 * one of ours (from pools the layer makes in the list's context; the
 * program's tracers still see its NULL), reset before each submission and
 * returned when the list is reset or destroyed. */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xpti/xpti_trace_framework.h>
#include <xptrace/xptrace_protocol.h>

#include "xsym_site.h"
#include "ze_layer.h"

#define GRAPH_BUCKETS 1024
#define GRAPH_TRACK_BASE 0x2e000000u /* apart from other layers' queue ids */
#define GRAPH_POOL_EVENTS 256
#define GRAPH_MAX_POOLS 64

/* A queue, or an immediate list (its own queue). */
typedef struct graph_track {
  uint64_t id;
  double ns_per_tick;
  int64_t offset_ns; /* host CLOCK_MONOTONIC - device ns */
  char name[96];
} graph_track_t;

typedef struct graph_cmd {
  xpti_trace_event_data_t *node;
  uint64_t instance;
  ze_event_handle_t signal;
  ze_context_handle_t internal; /* signal is ours, from this context's pools */
} graph_cmd_t;

/* Our events of one context: pools, and the events not in use. */
typedef struct graph_context {
  ze_context_handle_t handle;
  ze_event_pool_handle_t pools[GRAPH_MAX_POOLS];
  ze_event_handle_t *events; /* every one made */
  ze_event_handle_t *free;
  size_t npools, nevents, nfree;
  struct graph_context *next;
} graph_context_t;

typedef struct graph_list {
  ze_command_list_handle_t handle;
  ze_context_handle_t context;
  uint64_t last_uid; /* list order */
  graph_track_t *immediate; /* immediate lists: their track */
  graph_cmd_t *cmds;
  size_t count, cap;
  struct graph_list *next;
} graph_list_t;

typedef struct graph_queue {
  ze_command_queue_handle_t handle;
  graph_track_t track;
  struct graph_queue *next;
} graph_queue_t;

typedef struct graph_event {
  ze_event_handle_t handle;
  uint64_t uid; /* last command appended to signal it */
  struct graph_event *next;
} graph_event_t;

typedef struct graph_pending {
  graph_cmd_t cmd;
  graph_track_t *track;
  bool release; /* an immediate list's event of ours: returned once reported */
} graph_pending_t;

static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static xpti_trace_event_data_t *graph_root;
static graph_list_t *graph_lists[GRAPH_BUCKETS];
static graph_queue_t *graph_queues[GRAPH_BUCKETS];
static graph_event_t *graph_events[GRAPH_BUCKETS];
static graph_context_t *graph_contexts;
static graph_pending_t *graph_pending;
static size_t graph_npending, graph_pending_cap;
static uint64_t graph_track_ids;
static uintptr_t graph_skip_bases[3];
static uint16_t graph_timed_type;
static _Atomic bool graph_oom_reported;

static size_t graph_bucket(const void *h) { return ((uintptr_t)h >> 4) % GRAPH_BUCKETS; }

void ze_graph_init(void) {
  graph_skip_bases[0] = xsym_module_base((const void *)ze_graph_init);
  /* The loader, also when the program dlopened it (not in the global scope). */
  void *loader = dlopen("libze_loader.so.1", RTLD_NOW | RTLD_NOLOAD);
  graph_skip_bases[1] = xsym_module_base(loader ? dlsym(loader, "zeCommandListAppendMemoryCopy")
                                             : dlsym(RTLD_DEFAULT, "zeCommandListAppendMemoryCopy"));
  if (loader)
    dlclose(loader);
  graph_skip_bases[2] = xsym_module_base(dlsym(RTLD_DEFAULT, "backtrace"));
  graph_timed_type = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID);
}

static void graph_oom(void) {
  if (!atomic_exchange(&graph_oom_reported, true))
    fprintf(stderr, "xpti: level_zero.graph: out of memory; some commands are not graphed\n");
}

static void graph_track_init(graph_track_t *t, ze_device_handle_t device, const char *kind) {
  t->id = GRAPH_TRACK_BASE + ++graph_track_ids;
  t->ns_per_tick = 1;
  t->offset_ns = 0;
  char device_name[64] = "";
  ze_device_properties_t props;
  memset(&props, 0, sizeof props);
  props.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
  if (device && ze_next.Device.pfnGetProperties &&
      ze_next.Device.pfnGetProperties(device, &props) == ZE_RESULT_SUCCESS) {
    if (props.timerResolution)
      t->ns_per_tick = (double)props.timerResolution;
    snprintf(device_name, sizeof device_name, "%.63s", props.name);
  }
  uint64_t host, dev;
  if (device && ze_next.Device.pfnGetGlobalTimestamps &&
      ze_next.Device.pfnGetGlobalTimestamps(device, &host, &dev) == ZE_RESULT_SUCCESS)
    t->offset_ns = (int64_t)host - (int64_t)((double)dev * t->ns_per_tick);
  snprintf(t->name, sizeof t->name, "Level Zero %s %" PRIu64 "%s%s", kind,
           t->id - GRAPH_TRACK_BASE, device_name[0] ? " (" : "", device_name);
  if (device_name[0])
    strcat(t->name, ")");
}

static void graph_list_release_locked(graph_list_t *l);

static graph_list_t *graph_list_locked(ze_command_list_handle_t h, bool create) {
  graph_list_t **b = &graph_lists[graph_bucket(h)];
  for (graph_list_t *l = *b; l; l = l->next)
    if (l->handle == h)
      return l;
  if (!create)
    return NULL;
  graph_list_t *l = calloc(1, sizeof *l);
  if (!l)
    return NULL;
  l->handle = h;
  l->next = *b;
  *b = l;
  return l;
}

static void graph_list_forget_locked(ze_command_list_handle_t h) {
  for (graph_list_t **p = &graph_lists[graph_bucket(h)]; *p; p = &(*p)->next)
    if ((*p)->handle == h) {
      graph_list_t *l = *p;
      *p = l->next;
      graph_list_release_locked(l);
      free(l->cmds);
      free(l->immediate);
      free(l);
      return;
    }
}

static graph_queue_t *graph_queue_locked(ze_command_queue_handle_t h, ze_device_handle_t device) {
  graph_queue_t **b = &graph_queues[graph_bucket(h)];
  for (graph_queue_t *q = *b; q; q = q->next)
    if (q->handle == h) {
      if (device) /* made again at a released queue's address: a new track */
        graph_track_init(&q->track, device, "queue");
      return q;
    }
  graph_queue_t *q = calloc(1, sizeof *q);
  if (!q)
    return NULL;
  q->handle = h;
  graph_track_init(&q->track, device, "queue");
  q->next = *b;
  *b = q;
  return q;
}

static graph_event_t *graph_event_locked(ze_event_handle_t h, bool create) {
  graph_event_t **b = &graph_events[graph_bucket(h)];
  for (graph_event_t *e = *b; e; e = e->next)
    if (e->handle == h)
      return e;
  if (!create)
    return NULL;
  graph_event_t *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  e->handle = h;
  e->next = *b;
  *b = e;
  return e;
}

static void graph_event_forget_locked(ze_event_handle_t h) {
  for (graph_event_t **p = &graph_events[graph_bucket(h)]; *p; p = &(*p)->next)
    if ((*p)->handle == h) {
      graph_event_t *e = *p;
      *p = e->next;
      free(e);
      return;
    }
}

/* ---- our events ------------------------------------------------------ */
static graph_context_t *graph_context_locked(ze_context_handle_t h, bool create) {
  for (graph_context_t *c = graph_contexts; c; c = c->next)
    if (c->handle == h)
      return c;
  if (!create)
    return NULL;
  graph_context_t *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->handle = h;
  c->next = graph_contexts;
  graph_contexts = c;
  return c;
}

/* An event of ours, reset, or NULL (no pool could be made). */
static ze_event_handle_t graph_event_take_locked(ze_context_handle_t ctx) {
  graph_context_t *c = graph_context_locked(ctx, true);
  if (!c)
    return NULL;
  if (!c->nfree && c->npools < GRAPH_MAX_POOLS && ze_next.EventPool.pfnCreate &&
      ze_next.Event.pfnCreate) {
    ze_event_pool_desc_t pd = {ZE_STRUCTURE_TYPE_EVENT_POOL_DESC, NULL,
                               ZE_EVENT_POOL_FLAG_HOST_VISIBLE |
                                   ZE_EVENT_POOL_FLAG_KERNEL_TIMESTAMP,
                               GRAPH_POOL_EVENTS};
    ze_event_pool_handle_t pool;
    size_t n = c->nevents + GRAPH_POOL_EVENTS;
    ze_event_handle_t *all = realloc(c->events, n * sizeof *all);
    if (all)
      c->events = all;
    ze_event_handle_t *fr = all ? realloc(c->free, n * sizeof *fr) : NULL;
    if (fr)
      c->free = fr;
    if (fr && ze_next.EventPool.pfnCreate(ctx, &pd, 0, NULL, &pool) == ZE_RESULT_SUCCESS) {
      c->pools[c->npools++] = pool;
      for (uint32_t i = 0; i < GRAPH_POOL_EVENTS; i++) {
        ze_event_desc_t ed = {ZE_STRUCTURE_TYPE_EVENT_DESC, NULL, i, ZE_EVENT_SCOPE_FLAG_HOST,
                              ZE_EVENT_SCOPE_FLAG_HOST};
        ze_event_handle_t e;
        if (ze_next.Event.pfnCreate(pool, &ed, &e) == ZE_RESULT_SUCCESS)
          c->events[c->nevents++] = e, c->free[c->nfree++] = e;
      }
    }
  }
  if (!c->nfree) {
    graph_oom();
    return NULL;
  }
  return c->free[--c->nfree];
}

static void graph_event_give_locked(ze_context_handle_t ctx, ze_event_handle_t e) {
  graph_context_t *c = graph_context_locked(ctx, false);
  if (!c || !e)
    return;
  if (ze_next.Event.pfnHostReset)
    (void)ze_next.Event.pfnHostReset(e);
  c->free[c->nfree++] = e; /* room: free holds at most every event made */
}

static void graph_pending_drop_locked(ze_event_handle_t e) {
  for (size_t i = 0; i < graph_npending;)
    if (graph_pending[i].cmd.signal == e)
      graph_pending[i] = graph_pending[--graph_npending];
    else
      i++;
}

static void graph_harvest_locked(ze_event_handle_t only);

/* A list's commands are gone (reset, destroyed): completions reported,
 * our events back. */
static void graph_list_release_locked(graph_list_t *l) {
  graph_harvest_locked(NULL);
  for (size_t k = 0; k < l->count; k++)
    if (l->cmds[k].internal) {
      graph_pending_drop_locked(l->cmds[k].signal);
      graph_event_give_locked(l->cmds[k].internal, l->cmds[k].signal);
    }
  l->count = 0;
  l->last_uid = 0;
}

static void graph_root_locked(void) {
  if (graph_root)
    return;
  xpti_payload_t payload =
      xpti_payload_make("Level Zero", NULL, XPTI_INVALID_LINE, XPTI_INVALID_LINE, NULL);
  uint64_t instance = 0;
  graph_root = xptiMakeEvent("Level Zero", &payload, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE,
                             &instance);
  if (graph_root)
    (void)xptiNotifySubscribers(ze_graph_stream, XPTI_TRACE_GRAPH_CREATE, NULL, graph_root,
                                instance, NULL);
}

static void graph_edge_locked(uint64_t from, uint64_t to) {
  if (!from || !to || from == to)
    return;
  char name[64];
  snprintf(name, sizeof name, "edge %" PRIx64 "->%" PRIx64, from, to);
  xpti_payload_t payload = xpti_payload_make(name, NULL, XPTI_INVALID_LINE, XPTI_INVALID_LINE, NULL);
  uint64_t instance = 0;
  xpti_trace_event_data_t *edge =
      xptiMakeEvent(name, &payload, XPTI_EVENT_GRAPH, XPTI_ACTIVITY_ACTIVE, &instance);
  if (!edge || instance != 1)
    return;
  edge->source_id = from;
  edge->target_id = to;
  edge->flags |= XPTI_EVENT_SOURCE_UID_AVAILABLE | XPTI_EVENT_TARGET_UID_AVAILABLE;
  (void)xptiNotifySubscribers(ze_graph_stream, XPTI_TRACE_EDGE_CREATE, graph_root, edge, instance,
                              NULL);
}

static void graph_add_metadata(xpti_trace_event_data_t *ev, const char *key, const char *value) {
  int32_t id = xptiRegisterObject(value, strlen(value) + 1, XPTI_METADATA_STRING);
  if (id != XPTI_INVALID_OBJECT_ID)
    (void)xptiAddMetadata(ev, key, id);
}

/* ---- completions ---------------------------------------------------- */
static void graph_pending_add_locked(const graph_cmd_t *c, graph_track_t *t, bool release) {
  if (graph_npending == graph_pending_cap) {
    size_t cap = graph_pending_cap ? 2 * graph_pending_cap : 256;
    graph_pending_t *n = realloc(graph_pending, cap * sizeof *n);
    if (!n) {
      graph_oom();
      return;
    }
    graph_pending = n;
    graph_pending_cap = cap;
  }
  graph_pending[graph_npending++] = (graph_pending_t){*c, t, release};
}

/* Reports every pending command whose event has signalled (only those of
 * event when given): task_begin/task_end and the timed slice. */
static void graph_harvest_locked(ze_event_handle_t only) {
  for (size_t i = 0; i < graph_npending;) {
    graph_pending_t *p = &graph_pending[i];
    ze_kernel_timestamp_result_t ts;
    if ((only && p->cmd.signal != only) ||
        ze_next.Event.pfnQueryStatus(p->cmd.signal) != ZE_RESULT_SUCCESS ||
        !ze_next.Event.pfnQueryKernelTimestamp ||
        ze_next.Event.pfnQueryKernelTimestamp(p->cmd.signal, &ts) != ZE_RESULT_SUCCESS) {
      i++;
      continue;
    }
    graph_track_t *t = p->track;
    uint64_t begin = (uint64_t)((double)ts.global.kernelStart * t->ns_per_tick + (double)t->offset_ns);
    uint64_t end = (uint64_t)((double)ts.global.kernelEnd * t->ns_per_tick + (double)t->offset_ns);
    (void)xptiNotifySubscribers(ze_graph_stream, XPTI_TRACE_TASK_BEGIN, graph_root, p->cmd.node,
                                p->cmd.instance, NULL);
    (void)xptiNotifySubscribers(ze_graph_stream, XPTI_TRACE_TASK_END, graph_root, p->cmd.node,
                                p->cmd.instance, NULL);
    if (graph_timed_type && end >= begin &&
        xptiCheckTraceEnabled(ze_graph_stream, graph_timed_type)) {
      xptrace_timed_slice_t slice = {begin, end, t->id, t->name, NULL};
      (void)xptiNotifySubscribers(ze_graph_stream, graph_timed_type, graph_root, p->cmd.node,
                                  p->cmd.instance, &slice);
    }
    if (p->release)
      graph_event_give_locked(p->cmd.internal, p->cmd.signal);
    graph_pending[i] = graph_pending[--graph_npending];
  }
}

/* ---- appends ---------------------------------------------------------- */
typedef struct graph_append {
  ze_command_list_handle_t list;
  ze_event_handle_t signal;
  uint32_t nwait;
  ze_event_handle_t *waits;
  const char *name;     /* kernel name, or the function */
  const char *function; /* the append function */
  ze_kernel_handle_t kernel;
  uint64_t bytes;
  uint16_t type;
} graph_append_t;

static bool graph_describe(uint32_t fn, void *params, graph_append_t *a) {
  memset(a, 0, sizeof *a);
  a->type = XPTI_EVENT_ASYNC;
  a->name = a->function = ze_function_name(fn);
  switch (fn) {
  case XPT_ZE_FN_CommandListAppendLaunchKernel: {
    ze_command_list_append_launch_kernel_params_t *p = params;
    a->list = *p->phCommandList, a->signal = *p->phSignalEvent;
    a->nwait = *p->pnumWaitEvents, a->waits = *p->pphWaitEvents;
    a->kernel = *p->phKernel;
    a->type = XPTI_EVENT_ALGORITHM;
    return true;
  }
  case XPT_ZE_FN_CommandListAppendMemoryCopy: {
    ze_command_list_append_memory_copy_params_t *p = params;
    a->list = *p->phCommandList, a->signal = *p->phSignalEvent;
    a->nwait = *p->pnumWaitEvents, a->waits = *p->pphWaitEvents;
    a->bytes = *p->psize;
    return true;
  }
  case XPT_ZE_FN_CommandListAppendMemoryFill: {
    ze_command_list_append_memory_fill_params_t *p = params;
    a->list = *p->phCommandList, a->signal = *p->phSignalEvent;
    a->nwait = *p->pnumWaitEvents, a->waits = *p->pphWaitEvents;
    a->bytes = *p->psize;
    return true;
  }
  case XPT_ZE_FN_CommandListAppendBarrier: {
    ze_command_list_append_barrier_params_t *p = params;
    a->list = *p->phCommandList, a->signal = *p->phSignalEvent;
    a->nwait = *p->pnumWaitEvents, a->waits = *p->pphWaitEvents;
    a->type = XPTI_EVENT_BARRIER;
    return true;
  }
  case XPT_ZE_FN_CommandListAppendSignalEvent: {
    ze_command_list_append_signal_event_params_t *p = params;
    a->list = *p->phCommandList, a->signal = *p->phEvent;
    return true;
  }
  case XPT_ZE_FN_CommandListAppendWaitOnEvents: {
    ze_command_list_append_wait_on_events_params_t *p = params;
    a->list = *p->phCommandList;
    a->nwait = *p->pnumEvents, a->waits = *p->pphEvents;
    a->type = XPTI_EVENT_BARRIER;
    return true;
  }
  case XPT_ZE_FN_CommandListAppendEventReset: {
    ze_command_list_append_event_reset_params_t *p = params;
    a->list = *p->phCommandList; /* resets, signals nothing */
    return true;
  }
  default:
    return false;
  }
}

/* The command was appended: its node and edges; with an event (the
 * program's or ours, internal = its context) its completion is awaited. */
static void graph_appended(graph_append_t *a, const void *caller, ze_context_handle_t internal) {
  char kernel_name[128];
  size_t size = sizeof kernel_name;
  if (a->kernel && ze_next.Kernel.pfnGetName &&
      ze_next.Kernel.pfnGetName(a->kernel, &size, kernel_name) == ZE_RESULT_SUCCESS) {
    kernel_name[sizeof kernel_name - 1] = 0;
    a->name = kernel_name;
  }
  const void *site = xsym_call_site(graph_skip_bases, sizeof graph_skip_bases / sizeof graph_skip_bases[0], caller);
  char file[256];
  uint32_t line;
  xsym_site_resolve(site, file, sizeof file, &line);
  pthread_mutex_lock(&graph_lock);
  graph_root_locked();
  graph_list_t *l = graph_list_locked(a->list, true);
  xpti_payload_t payload = xpti_payload_make(a->name, file[0] ? file : NULL, line, 0, site);
  uint64_t instance = 0;
  xpti_trace_event_data_t *node =
      graph_root && l ? xptiMakeEvent(a->name, &payload, a->type, XPTI_ACTIVITY_ACTIVE, &instance)
                      : NULL;
  if (!node) {
    if (internal)
      graph_event_give_locked(internal, a->signal);
    pthread_mutex_unlock(&graph_lock);
    return;
  }
  if (instance == 1) {
    char text[32];
    graph_add_metadata(node, "kernel_name", a->kernel ? a->name : "");
    graph_add_metadata(node, "command", a->function);
    snprintf(text, sizeof text, "%" PRIu64, a->bytes);
    graph_add_metadata(node, "bytes", text);
    (void)xptiNotifySubscribers(ze_graph_stream, XPTI_TRACE_NODE_CREATE, graph_root, node,
                                instance, NULL);
  }
  uint64_t uid = node->unique_id;
  graph_edge_locked(l->last_uid, uid); /* lists run in order */
  for (uint32_t i = 0; a->waits && i < a->nwait; i++) {
    graph_event_t *e = graph_event_locked(a->waits[i], false);
    if (e)
      graph_edge_locked(e->uid, uid);
  }
  l->last_uid = uid;
  if (a->signal) {
    graph_event_t *e = internal ? NULL : graph_event_locked(a->signal, true);
    if (e)
      e->uid = uid;
    graph_cmd_t c = {node, instance, a->signal, internal};
    if (l->immediate) {
      graph_pending_add_locked(&c, l->immediate, internal != NULL);
    } else {
      if (l->count == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        graph_cmd_t *n = realloc(l->cmds, cap * sizeof *n);
        if (n)
          l->cmds = n, l->cap = cap;
      }
      if (l->count < l->cap) {
        l->cmds[l->count++] = c;
      } else {
        graph_oom();
        if (internal)
          graph_event_give_locked(internal, a->signal);
      }
    }
  }
  pthread_mutex_unlock(&graph_lock);
}

/* The slot of an append's signal event. */
static ze_event_handle_t *graph_signal_slot(uint32_t fn, void *params) {
  switch (fn) {
  case XPT_ZE_FN_CommandListAppendLaunchKernel:
    return ((ze_command_list_append_launch_kernel_params_t *)params)->phSignalEvent;
  case XPT_ZE_FN_CommandListAppendMemoryCopy:
    return ((ze_command_list_append_memory_copy_params_t *)params)->phSignalEvent;
  case XPT_ZE_FN_CommandListAppendMemoryFill:
    return ((ze_command_list_append_memory_fill_params_t *)params)->phSignalEvent;
  case XPT_ZE_FN_CommandListAppendBarrier:
    return ((ze_command_list_append_barrier_params_t *)params)->phSignalEvent;
  default:
    return NULL;
  }
}

void ze_graph_before(uint32_t fn, void *params, ze_graph_call_t *g) {
  pthread_mutex_lock(&graph_lock);
  switch (fn) {
  case XPT_ZE_FN_EventHostReset:
    graph_harvest_locked(*((ze_event_host_reset_params_t *)params)->phEvent);
    break;
  case XPT_ZE_FN_EventDestroy: {
    ze_event_handle_t e = *((ze_event_destroy_params_t *)params)->phEvent;
    graph_harvest_locked(e);
    graph_pending_drop_locked(e); /* never signalled: gone */
    graph_event_forget_locked(e);
    break;
  }
  case XPT_ZE_FN_CommandListReset:
  case XPT_ZE_FN_CommandListDestroy: {
    /* Both params structs hold just the list. */
    ze_command_list_handle_t h = *((ze_command_list_reset_params_t *)params)->phCommandList;
    graph_list_t *l = graph_list_locked(h, false);
    if (l)
      graph_list_release_locked(l);
    break;
  }
  case XPT_ZE_FN_CommandQueueExecuteCommandLists: {
    /* Our events: unsignalled again, for this run's times. */
    ze_command_queue_execute_command_lists_params_t *p = params;
    for (uint32_t i = 0; *p->pphCommandLists && i < *p->pnumCommandLists; i++) {
      graph_list_t *l = graph_list_locked((*p->pphCommandLists)[i], false);
      for (size_t k = 0; l && k < l->count; k++)
        if (l->cmds[k].internal && ze_next.Event.pfnHostReset)
          (void)ze_next.Event.pfnHostReset(l->cmds[k].signal);
    }
    break;
  }
  case XPT_ZE_FN_ContextDestroy: {
    ze_context_handle_t ctx = *((ze_context_destroy_params_t *)params)->phContext;
    graph_context_t **pc = &graph_contexts;
    while (*pc && (*pc)->handle != ctx)
      pc = &(*pc)->next;
    if (!*pc)
      break;
    graph_harvest_locked(NULL);
    graph_context_t *c = *pc;
    /* Lists of the context still holding our events: the events go now. */
    for (size_t b = 0; b < GRAPH_BUCKETS; b++)
      for (graph_list_t *l = graph_lists[b]; l; l = l->next)
        for (size_t k = 0; k < l->count; k++)
          if (l->cmds[k].internal == ctx)
            l->cmds[k].internal = NULL, l->cmds[k].signal = NULL;
    for (size_t i = 0; i < c->nevents; i++) {
      graph_pending_drop_locked(c->events[i]);
      (void)ze_next.Event.pfnDestroy(c->events[i]);
    }
    for (size_t i = 0; i < c->npools; i++)
      (void)ze_next.EventPool.pfnDestroy(c->pools[i]);
    *pc = c->next;
    free(c->events);
    free(c->free);
    free(c);
    break;
  }
  default: {
    ze_event_handle_t *slot = graph_signal_slot(fn, params);
    /* Both append params structs start with the list. */
    graph_list_t *l =
        slot ? graph_list_locked(*((ze_command_list_close_params_t *)params)->phCommandList, false)
             : NULL;
    if (slot && !*slot && l && l->context && (g->internal = graph_event_take_locked(l->context))) {
      g->slot = slot;
      g->context = l->context;
      *slot = g->internal;
    }
    break;
  }
  }
  pthread_mutex_unlock(&graph_lock);
}

void ze_graph_after(uint32_t fn, void *params, ze_result_t result, const void *caller,
                    ze_graph_call_t *g) {
  graph_append_t a;
  if (result != ZE_RESULT_SUCCESS) {
    if (g->internal) {
      pthread_mutex_lock(&graph_lock);
      graph_event_give_locked(g->context, g->internal);
      pthread_mutex_unlock(&graph_lock);
      *g->slot = NULL;
    }
    return;
  }
  if (graph_describe(fn, params, &a)) {
    graph_appended(&a, caller, g->internal ? g->context : NULL);
    if (g->internal)
      *g->slot = NULL; /* the program's tracers see its own argument */
    return;
  }
  pthread_mutex_lock(&graph_lock);
  switch (fn) {
  case XPT_ZE_FN_CommandQueueCreate: {
    ze_command_queue_create_params_t *p = params;
    (void)graph_queue_locked(**p->pphCommandQueue, *p->phDevice);
    break;
  }
  case XPT_ZE_FN_CommandListCreateImmediate: {
    ze_command_list_create_immediate_params_t *p = params;
    graph_list_forget_locked(**p->pphCommandList);
    graph_list_t *l = graph_list_locked(**p->pphCommandList, true);
    if (l) {
      l->context = *p->phContext;
      if ((l->immediate = calloc(1, sizeof *l->immediate)))
        graph_track_init(l->immediate, *p->phDevice, "immediate list");
    }
    break;
  }
  case XPT_ZE_FN_CommandListCreate: {
    ze_command_list_create_params_t *p = params;
    graph_list_forget_locked(**p->pphCommandList);
    graph_list_t *l = graph_list_locked(**p->pphCommandList, true);
    if (l)
      l->context = *p->phContext;
    break;
  }
  case XPT_ZE_FN_CommandListDestroy:
    graph_list_forget_locked(*((ze_command_list_destroy_params_t *)params)->phCommandList);
    break;
  case XPT_ZE_FN_CommandQueueExecuteCommandLists: {
    ze_command_queue_execute_command_lists_params_t *p = params;
    graph_queue_t *q = graph_queue_locked(*p->phCommandQueue, NULL);
    for (uint32_t i = 0; q && *p->pphCommandLists && i < *p->pnumCommandLists; i++) {
      graph_list_t *l = graph_list_locked((*p->pphCommandLists)[i], false);
      for (size_t k = 0; l && k < l->count; k++)
        if (l->cmds[k].signal)
          graph_pending_add_locked(&l->cmds[k], &q->track, false);
    }
    break;
  }
  case XPT_ZE_FN_EventQueryStatus:
    graph_harvest_locked(*((ze_event_query_status_params_t *)params)->phEvent);
    break;
  case XPT_ZE_FN_CommandQueueSynchronize:
  case XPT_ZE_FN_EventHostSynchronize:
  case XPT_ZE_FN_FenceHostSynchronize:
    graph_harvest_locked(NULL);
    break;
  default:
    break;
  }
  pthread_mutex_unlock(&graph_lock);
}
