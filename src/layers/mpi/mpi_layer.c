/* libxptrace_mpi.so: the MPI layer on the PMPI profiling interface.
 * Preloaded (xptrace run --mpi), it defines MPI_Send and friends, calls
 * PMPI_Send, and sends every call as a slice on the XPTI stream
 * "mpi.api" (include/xptrace/mpi_tracing.h), messages as flows between
 * processes.  This file: the XPTI side, communicators, point-to-point
 * calls and the completion of requests; mpi_coll.c the rest. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_layer.h"
#include "xpti/xpti_trace_framework.h"
#include "xptrace/xptrace_protocol.h"

_Static_assert(offsetof(xpt_mpi_call_t, function_name) ==
                   offsetof(xpti_function_with_args_t, function_name), "call layout");
_Static_assert(offsetof(xpt_mpi_call_t, args) == offsetof(xpti_function_with_args_t, args_data),
               "call layout");
_Static_assert(offsetof(xpt_mpi_call_t, return_value) ==
                   offsetof(xpti_function_with_args_t, ret_data), "call layout");

#define XPT_MPI_NAME(name) #name,
static const char *const layer_names[XPT_MPI_FN_COUNT] = {XPT_MPI_FUNCTIONS(XPT_MPI_NAME)};
#undef XPT_MPI_NAME

int layer_world_rank = -1, layer_world_size = -1;
uint64_t layer_job_salt;
xpt_mpi_chans_t layer_chans = XPT_MPI_CHANS_INIT;
xpt_mpi_reqs_t layer_reqs = XPT_MPI_REQS_INIT;

static pthread_once_t layer_once = PTHREAD_ONCE_INIT;
static uint8_t layer_stream = XPTI_INVALID_STREAM_ID;
static bool layer_live; /* a dispatcher is loaded: ask it per call */
static uint16_t layer_flow_type[2];
static xpti_trace_event_data_t *layer_msg_event;
static _Atomic uint64_t layer_correlation, layer_requests;
/* MPI calls made while this thread is inside a traced call (by MPI
 * itself, or by a subscriber) are not traced again. */
static __thread int layer_depth __attribute__((tls_model("initial-exec")));

static void layer_xpti_init(void) {
  /* FAIL: no dispatcher; then nothing can ever listen. */
  if (xptiInitialize(XPT_MPI_STREAM, 1, 0, "1.0") == XPTI_RESULT_FAIL)
    return;
  layer_stream = xptiRegisterStream(XPT_MPI_STREAM);
  if (layer_stream == XPTI_INVALID_STREAM_ID)
    return;
  layer_flow_type[0] = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_FLOW_OUT_ID);
  layer_flow_type[1] = xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_FLOW_IN_ID);
  xpti_payload_t p = xpti_payload_make("MPI message", NULL, 0, 0, NULL);
  uint64_t instance;
  layer_msg_event = xptiMakeEvent("MPI message", &p, XPTI_EVENT_ASYNC, XPTI_ACTIVITY_ACTIVE,
                                  &instance);
  layer_clock_setup();
  layer_live = true;
}

bool layer_listened(void) {
  pthread_once(&layer_once, layer_xpti_init);
  return layer_live && xptiCheckTraceEnabled(layer_stream, 0);
}

bool layer_enter(layer_call_t *c, int fn) {
  c->on = false;
  pthread_once(&layer_once, layer_xpti_init);
  if (!layer_live || layer_depth || !xptiCheckTraceEnabled(layer_stream, 0))
    return false;
  layer_depth++;
  c->on = true;
  c->a = (xpt_mpi_args_t){-1, -1, 0, -1, -1, 0, 0, 0, 0};
  c->c = (xpt_mpi_call_t){(uint32_t)fn, layer_names[fn], &c->a, NULL,
                          atomic_fetch_add_explicit(&layer_correlation, 1, memory_order_relaxed) + 1};
  return true;
}

void layer_begin(layer_call_t *c) {
  (void)xptiNotifySubscribers(layer_stream, XPTI_TRACE_FUNCTION_WITH_ARGS_BEGIN, NULL, NULL,
                              c->c.correlation_id, &c->c);
}

void layer_end(layer_call_t *c, int *rc) {
  c->c.return_value = rc;
  (void)xptiNotifySubscribers(layer_stream, XPTI_TRACE_FUNCTION_WITH_ARGS_END, NULL, NULL,
                              c->c.correlation_id, &c->c);
  layer_depth--;
}

void layer_flow(layer_call_t *c, int dir, uint64_t id) {
  if (!id || !layer_msg_event || !layer_flow_type[dir])
    return;
  c->a.flows++;
  (void)xptiNotifySubscribers(layer_stream, layer_flow_type[dir], NULL, layer_msg_event, id, NULL);
}

uint64_t layer_request_id(void) {
  uint64_t n = atomic_fetch_add_explicit(&layer_requests, 1, memory_order_relaxed) + 1;
  return (uint64_t)(uint32_t)(layer_world_rank < 0 ? 0 : layer_world_rank) << 40 | n;
}

uint64_t layer_bytes(int count, MPI_Datatype type) {
  int size = 0;
  if (count <= 0 || type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS ||
      size < 0)
    return 0;
  return (uint64_t)count * (uint64_t)size;
}

/* ---- communicators -------------------------------------------------- */

static pthread_mutex_t layer_comm_lock = PTHREAD_MUTEX_INITIALIZER;
static layer_comm_t *layer_comms;
static layer_comm_t layer_world;

static uint64_t layer_mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}

/* Facts of a communicator not seen before; the id hashes the members'
 * world ranks (the same on every member, with no message). */
static layer_comm_t *layer_comm_new(MPI_Comm comm) {
  layer_comm_t *lc = calloc(1, sizeof *lc);
  if (!lc)
    return NULL;
  lc->comm = comm;
  int inter = 0;
  if (PMPI_Comm_rank(comm, &lc->rank) != MPI_SUCCESS ||
      PMPI_Comm_size(comm, &lc->size) != MPI_SUCCESS || lc->size <= 0 ||
      PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) {
    free(lc);
    return NULL;
  }
  lc->inter = inter != 0;
  lc->world = malloc((size_t)lc->size * 2 * sizeof(int));
  MPI_Group group, world;
  if (lc->world && !lc->inter && PMPI_Comm_group(comm, &group) == MPI_SUCCESS) {
    if (PMPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
      int *ranks = lc->world + lc->size;
      for (int i = 0; i < lc->size; i++)
        ranks[i] = i;
      if (PMPI_Group_translate_ranks(group, lc->size, ranks, world, lc->world) != MPI_SUCCESS)
        lc->inter = true; /* cannot name its members: no flows */
      PMPI_Group_free(&world);
    }
    PMPI_Group_free(&group);
  } else {
    lc->inter = true;
  }
  uint64_t h = 0x2545f4914f6cdd1dull;
  for (int i = 0; lc->world && !lc->inter && i < lc->size; i++)
    h = layer_mix(h ^ (uint64_t)(uint32_t)lc->world[i]);
  lc->id = h | 1; /* never 0, MPI_COMM_WORLD's */
  return lc;
}

void layer_world_set(int rank, int size) {
  layer_world.comm = MPI_COMM_WORLD;
  layer_world.rank = rank;
  __atomic_store_n(&layer_world.size, size, __ATOMIC_RELEASE); /* published last */
}

layer_comm_t *layer_comm(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL)
    return NULL;
  if (comm == MPI_COMM_WORLD) /* set by MPI_Init, before any other call */
    return __atomic_load_n(&layer_world.size, __ATOMIC_ACQUIRE) > 0 ? &layer_world : NULL;
  pthread_mutex_lock(&layer_comm_lock);
  layer_comm_t *lc = layer_comms;
  while (lc && lc->comm != comm)
    lc = lc->next;
  if (!lc && (lc = layer_comm_new(comm)) != NULL) {
    lc->next = layer_comms;
    layer_comms = lc;
  }
  pthread_mutex_unlock(&layer_comm_lock);
  return lc;
}

void layer_comm_made(MPI_Comm parent, MPI_Comm made) {
  /* Every member of parent makes it in the same order: the n-th child
   * of parent tells duplicates of one group apart. */
  layer_comm_t *p = layer_comm(parent);
  uint64_t n = 0;
  if (p) {
    pthread_mutex_lock(&layer_comm_lock);
    n = ++p->children;
    pthread_mutex_unlock(&layer_comm_lock);
  }
  layer_comm_t *lc = layer_comm(made);
  if (lc && p) {
    pthread_mutex_lock(&layer_comm_lock);
    lc->id = layer_mix(lc->id ^ layer_mix(p->id + n)) | 1;
    pthread_mutex_unlock(&layer_comm_lock);
  }
}

void layer_comm_forget(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD || comm == MPI_COMM_NULL)
    return;
  pthread_mutex_lock(&layer_comm_lock);
  for (layer_comm_t **at = &layer_comms; *at; at = &(*at)->next)
    if ((*at)->comm == comm) {
      layer_comm_t *dead = *at;
      *at = dead->next;
      free(dead->world);
      free(dead);
      break;
    }
  pthread_mutex_unlock(&layer_comm_lock);
}

layer_comm_t *layer_args_comm(layer_call_t *c, MPI_Comm comm) {
  layer_comm_t *lc = layer_comm(comm);
  if (lc) {
    c->a.rank = lc->rank;
    c->a.comm_size = lc->size;
    c->a.comm_id = lc == &layer_world ? 0 : lc->id;
  }
  return lc;
}

static int layer_to_world(const layer_comm_t *lc, int rank) {
  if (!lc || lc->inter || rank < 0 || rank >= lc->size)
    return -1;
  return lc->world ? lc->world[rank] : rank;
}

static uint64_t layer_comm_id(const layer_comm_t *lc) { return lc == &layer_world ? 0 : lc->id; }

/* ---- point to point ------------------------------------------------- */

/* The flow of a send posted now (0: none, e.g. MPI_PROC_NULL). */
static uint64_t layer_send_flow(layer_comm_t *lc, int dest, int tag) {
  int to = layer_to_world(lc, dest), me = layer_to_world(lc, lc ? lc->rank : -1);
  if (to < 0 || me < 0)
    return 0;
  return xpt_mpi_chan_next(&layer_chans, layer_comm_id(lc) ^ layer_job_salt, me, to, tag, 0);
}

/* The flow of a receive completed with `st` on comm `lc`. */
static uint64_t layer_recv_flow(layer_comm_t *lc, const MPI_Status *st) {
  int cancelled = 0;
  if (!st || st->MPI_SOURCE < 0 || (PMPI_Test_cancelled(st, &cancelled) == MPI_SUCCESS && cancelled))
    return 0;
  int from = layer_to_world(lc, st->MPI_SOURCE), me = layer_to_world(lc, lc ? lc->rank : -1);
  if (from < 0 || me < 0)
    return 0;
  return xpt_mpi_chan_next(&layer_chans, layer_comm_id(lc) ^ layer_job_salt, me, from,
                           st->MPI_TAG, 1);
}

static void layer_recv_done(layer_call_t *c, layer_comm_t *lc, const MPI_Status *st,
                            MPI_Datatype type) {
  layer_flow(c, 1, layer_recv_flow(lc, st));
  c->a.peer = st->MPI_SOURCE;
  c->a.tag = st->MPI_TAG;
  int count = 0;
  if (type != MPI_DATATYPE_NULL && PMPI_Get_count(st, type, &count) == MPI_SUCCESS &&
      count != MPI_UNDEFINED)
    c->a.bytes = layer_bytes(count, type);
}

static int layer_send(int fn, const void *buf, int count, MPI_Datatype type, int dest, int tag,
                      MPI_Comm comm,
                      int (*send)(const void *, int, MPI_Datatype, int, int, MPI_Comm)) {
  layer_call_t c;
  if (!layer_enter(&c, fn))
    return send(buf, count, type, dest, tag, comm);
  layer_comm_t *lc = layer_args_comm(&c, comm);
  c.a.peer = dest;
  c.a.tag = tag;
  c.a.bytes = layer_bytes(count, type);
  layer_flow(&c, 0, layer_send_flow(lc, dest, tag));
  layer_begin(&c);
  int rc = send(buf, count, type, dest, tag, comm);
  layer_end(&c, &rc);
  return rc;
}

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return layer_send(XPT_MPI_FN_MPI_Send, buf, count, type, dest, tag, comm, PMPI_Send);
}
int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return layer_send(XPT_MPI_FN_MPI_Ssend, buf, count, type, dest, tag, comm, PMPI_Ssend);
}
int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return layer_send(XPT_MPI_FN_MPI_Bsend, buf, count, type, dest, tag, comm, PMPI_Bsend);
}
int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  return layer_send(XPT_MPI_FN_MPI_Rsend, buf, count, type, dest, tag, comm, PMPI_Rsend);
}

static int layer_isend(int fn, const void *buf, int count, MPI_Datatype type, int dest, int tag,
                       MPI_Comm comm, MPI_Request *req,
                       int (*isend)(const void *, int, MPI_Datatype, int, int, MPI_Comm,
                                    MPI_Request *)) {
  layer_call_t c;
  if (!layer_enter(&c, fn))
    return isend(buf, count, type, dest, tag, comm, req);
  layer_comm_t *lc = layer_args_comm(&c, comm);
  c.a.peer = dest;
  c.a.tag = tag;
  c.a.bytes = layer_bytes(count, type);
  c.a.request = layer_request_id();
  uint64_t flow = layer_send_flow(lc, dest, tag);
  layer_flow(&c, 0, flow);
  layer_begin(&c);
  int rc = isend(buf, count, type, dest, tag, comm, req);
  if (rc == MPI_SUCCESS && req) {
    xpt_mpi_req_t r = {(uint64_t)(uintptr_t)*req, c.a.request, flow, c.a.comm_id, NULL,
                       c.a.bytes, XPT_MPI_REQ_SEND};
    (void)xpt_mpi_req_put(&layer_reqs, &r);
  }
  layer_end(&c, &rc);
  return rc;
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
              MPI_Request *req) {
  return layer_isend(XPT_MPI_FN_MPI_Isend, buf, count, type, dest, tag, comm, req, PMPI_Isend);
}
int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request *req) {
  return layer_isend(XPT_MPI_FN_MPI_Issend, buf, count, type, dest, tag, comm, req, PMPI_Issend);
}
int MPI_Ibsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request *req) {
  return layer_isend(XPT_MPI_FN_MPI_Ibsend, buf, count, type, dest, tag, comm, req, PMPI_Ibsend);
}
int MPI_Irsend(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,
               MPI_Request *req) {
  return layer_isend(XPT_MPI_FN_MPI_Irsend, buf, count, type, dest, tag, comm, req, PMPI_Irsend);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Recv))
    return PMPI_Recv(buf, count, type, source, tag, comm, status);
  layer_comm_t *lc = layer_args_comm(&c, comm);
  c.a.peer = source;
  c.a.tag = tag;
  layer_begin(&c);
  MPI_Status own;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Recv(buf, count, type, source, tag, comm, st);
  if (rc == MPI_SUCCESS)
    layer_recv_done(&c, lc, st, type);
  layer_end(&c, &rc);
  return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *req) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Irecv))
    return PMPI_Irecv(buf, count, type, source, tag, comm, req);
  layer_args_comm(&c, comm);
  c.a.peer = source;
  c.a.tag = tag;
  c.a.bytes = layer_bytes(count, type);
  c.a.request = layer_request_id();
  layer_begin(&c);
  int rc = PMPI_Irecv(buf, count, type, source, tag, comm, req);
  if (rc == MPI_SUCCESS && req) {
    xpt_mpi_req_t r = {(uint64_t)(uintptr_t)*req, c.a.request, 0, c.a.comm_id, (const void *)comm,
                       c.a.bytes, XPT_MPI_REQ_RECV};
    (void)xpt_mpi_req_put(&layer_reqs, &r);
  }
  layer_end(&c, &rc);
  return rc;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Sendrecv))
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                         recvtype, source, recvtag, comm, status);
  layer_comm_t *lc = layer_args_comm(&c, comm);
  c.a.peer = dest;
  c.a.tag = sendtag;
  c.a.bytes = layer_bytes(sendcount, sendtype);
  layer_flow(&c, 0, layer_send_flow(lc, dest, sendtag));
  layer_begin(&c);
  MPI_Status own;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                         recvtype, source, recvtag, comm, st);
  if (rc == MPI_SUCCESS) {
    uint64_t sent = c.a.bytes;
    layer_recv_done(&c, lc, st, recvtype);
    c.a.bytes += sent;
  }
  layer_end(&c, &rc);
  return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Sendrecv_replace))
    return PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, status);
  layer_comm_t *lc = layer_args_comm(&c, comm);
  c.a.peer = dest;
  c.a.tag = sendtag;
  c.a.bytes = layer_bytes(count, type);
  layer_flow(&c, 0, layer_send_flow(lc, dest, sendtag));
  layer_begin(&c);
  MPI_Status own;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm, st);
  if (rc == MPI_SUCCESS) {
    uint64_t sent = c.a.bytes;
    layer_recv_done(&c, lc, st, type);
    c.a.bytes += sent;
  }
  layer_end(&c, &rc);
  return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Probe))
    return PMPI_Probe(source, tag, comm, status);
  layer_args_comm(&c, comm);
  c.a.peer = source;
  c.a.tag = tag;
  layer_begin(&c);
  int rc = PMPI_Probe(source, tag, comm, status);
  layer_end(&c, &rc);
  return rc;
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Iprobe))
    return PMPI_Iprobe(source, tag, comm, flag, status);
  layer_args_comm(&c, comm);
  c.a.peer = source;
  c.a.tag = tag;
  layer_begin(&c);
  int rc = PMPI_Iprobe(source, tag, comm, flag, status);
  layer_end(&c, &rc);
  return rc;
}

/* ---- completion ----------------------------------------------------- */

/* The communicator as the layer already knows it (NULL: freed since, or
 * never seen): no MPI call on a handle that may be gone. */
static layer_comm_t *layer_comm_known(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD)
    return layer_comm(comm);
  pthread_mutex_lock(&layer_comm_lock);
  layer_comm_t *lc = layer_comms;
  while (lc && lc->comm != comm)
    lc = lc->next;
  pthread_mutex_unlock(&layer_comm_lock);
  return lc;
}

/* Request `key` completed with status st: a receive's flow ends here. */
static void layer_completed(layer_call_t *c, uint64_t key, const MPI_Status *st) {
  xpt_mpi_req_t r;
  if (!key || !xpt_mpi_req_take(&layer_reqs, key, false, &r))
    return;
  if (!c->a.requests++)
    c->a.request = r.id;
  if (r.kind != XPT_MPI_REQ_RECV || !st)
    return;
  /* MPI_Comm_free may come before the wait of a receive on it. */
  layer_comm_t *lc = layer_comm_known((MPI_Comm)(uintptr_t)r.comm);
  layer_flow(c, 1, layer_recv_flow(lc, st));
  if (c->a.requests == 1) {
    c->a.peer = st->MPI_SOURCE;
    c->a.tag = st->MPI_TAG;
  }
  c->a.bytes += r.bytes;
}

/* Handles and statuses of a wait or test over n requests: on the stack
 * for small n; the caller's statuses when it gave some. */
typedef struct layer_batch {
  uint64_t keys_small[16];
  MPI_Status st_small[16];
  uint64_t *keys;
  MPI_Status *st;
  bool own_st;
} layer_batch_t;

static bool layer_batch_start(layer_batch_t *b, int n, const MPI_Request *reqs, MPI_Status *st) {
  b->keys = n <= 16 ? b->keys_small : malloc((size_t)n * sizeof *b->keys);
  b->own_st = st == MPI_STATUSES_IGNORE;
  b->st = !b->own_st ? st : n <= 16 ? b->st_small : malloc((size_t)n * sizeof *b->st);
  if (!b->keys || !b->st) {
    if (b->keys != b->keys_small)
      free(b->keys);
    if (b->own_st && b->st != b->st_small)
      free(b->st);
    return false;
  }
  for (int i = 0; i < n; i++)
    b->keys[i] = (uint64_t)(uintptr_t)reqs[i];
  return true;
}

static void layer_batch_end(layer_batch_t *b) {
  if (b->keys != b->keys_small)
    free(b->keys);
  if (b->own_st && b->st != b->st_small)
    free(b->st);
}

int MPI_Wait(MPI_Request *req, MPI_Status *status) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Wait))
    return PMPI_Wait(req, status);
  layer_begin(&c);
  uint64_t key = req ? (uint64_t)(uintptr_t)*req : 0;
  MPI_Status own;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Wait(req, st);
  if (rc == MPI_SUCCESS)
    layer_completed(&c, key, st);
  layer_end(&c, &rc);
  return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Test))
    return PMPI_Test(req, flag, status);
  layer_begin(&c);
  uint64_t key = req ? (uint64_t)(uintptr_t)*req : 0;
  MPI_Status own;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
  int rc = PMPI_Test(req, flag, st);
  if (rc == MPI_SUCCESS && flag && *flag)
    layer_completed(&c, key, st);
  layer_end(&c, &rc);
  return rc;
}

/* Waitall / Testall: every request completes (Testall: when *flag). */
static int layer_all(int fn, int n, MPI_Request reqs[], int *flag, MPI_Status st[]) {
  layer_call_t c;
  layer_batch_t b;
  bool test = fn == XPT_MPI_FN_MPI_Testall;
  if (!layer_enter(&c, fn))
    return test ? PMPI_Testall(n, reqs, flag, st) : PMPI_Waitall(n, reqs, st);
  layer_begin(&c);
  bool batch = n > 0 && layer_batch_start(&b, n, reqs, st);
  MPI_Status *use = batch ? b.st : st;
  int rc = test ? PMPI_Testall(n, reqs, flag, use) : PMPI_Waitall(n, reqs, use);
  if (batch) {
    if (rc == MPI_SUCCESS && (!test || (flag && *flag)))
      for (int i = 0; i < n; i++)
        layer_completed(&c, b.keys[i], &b.st[i]);
    layer_batch_end(&b);
  }
  layer_end(&c, &rc);
  return rc;
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status st[]) {
  return layer_all(XPT_MPI_FN_MPI_Waitall, n, reqs, NULL, st);
}
int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status st[]) {
  return layer_all(XPT_MPI_FN_MPI_Testall, n, reqs, flag, st);
}

/* Waitany / Testany: one request, *index. */
static int layer_any(int fn, int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
  layer_call_t c;
  layer_batch_t b;
  bool test = fn == XPT_MPI_FN_MPI_Testany;
  if (!layer_enter(&c, fn))
    return test ? PMPI_Testany(n, reqs, index, flag, status) : PMPI_Waitany(n, reqs, index, status);
  layer_begin(&c);
  MPI_Status own;
  MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
  bool batch = n > 0 && layer_batch_start(&b, n, reqs, st); /* keys only */
  int rc = test ? PMPI_Testany(n, reqs, index, flag, st) : PMPI_Waitany(n, reqs, index, st);
  if (batch) {
    if (rc == MPI_SUCCESS && index && *index != MPI_UNDEFINED && *index >= 0 && *index < n &&
        (!test || (flag && *flag)))
      layer_completed(&c, b.keys[*index], st);
    layer_batch_end(&b);
  }
  layer_end(&c, &rc);
  return rc;
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status) {
  return layer_any(XPT_MPI_FN_MPI_Waitany, n, reqs, index, NULL, status);
}
int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status) {
  return layer_any(XPT_MPI_FN_MPI_Testany, n, reqs, index, flag, status);
}

/* Waitsome / Testsome: *outcount requests, listed in indices (ascending
 * in Open MPI; sorted here to take them in posting order). */
static int layer_some(int fn, int n, MPI_Request reqs[], int *outcount, int indices[],
                      MPI_Status st[]) {
  layer_call_t c;
  layer_batch_t b;
  bool test = fn == XPT_MPI_FN_MPI_Testsome;
  if (!layer_enter(&c, fn))
    return test ? PMPI_Testsome(n, reqs, outcount, indices, st)
                : PMPI_Waitsome(n, reqs, outcount, indices, st);
  layer_begin(&c);
  bool batch = n > 0 && layer_batch_start(&b, n, reqs, st);
  MPI_Status *use = batch ? b.st : st;
  int rc = test ? PMPI_Testsome(n, reqs, outcount, indices, use)
                : PMPI_Waitsome(n, reqs, outcount, indices, use);
  if (batch) {
    if (rc == MPI_SUCCESS && outcount && *outcount != MPI_UNDEFINED)
      for (int k = 0; k < *outcount; k++)
        if (indices[k] >= 0 && indices[k] < n)
          layer_completed(&c, b.keys[indices[k]], &b.st[k]);
    layer_batch_end(&b);
  }
  layer_end(&c, &rc);
  return rc;
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status st[]) {
  return layer_some(XPT_MPI_FN_MPI_Waitsome, n, reqs, outcount, indices, st);
}
int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status st[]) {
  return layer_some(XPT_MPI_FN_MPI_Testsome, n, reqs, outcount, indices, st);
}

int MPI_Request_free(MPI_Request *req) {
  layer_call_t c;
  uint64_t key = req ? (uint64_t)(uintptr_t)*req : 0;
  xpt_mpi_req_t r;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Request_free)) {
    (void)xpt_mpi_req_take(&layer_reqs, key, false, &r);
    return PMPI_Request_free(req);
  }
  if (xpt_mpi_req_take(&layer_reqs, key, false, &r))
    c.a.request = r.id;
  layer_begin(&c);
  int rc = PMPI_Request_free(req);
  layer_end(&c, &rc);
  return rc;
}

int MPI_Cancel(MPI_Request *req) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Cancel))
    return PMPI_Cancel(req);
  xpt_mpi_req_t r;
  if (req && xpt_mpi_req_take(&layer_reqs, (uint64_t)(uintptr_t)*req, true, &r))
    c.a.request = r.id;
  layer_begin(&c);
  int rc = PMPI_Cancel(req);
  layer_end(&c, &rc);
  return rc;
}
