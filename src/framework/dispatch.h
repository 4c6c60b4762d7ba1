/* The dispatcher's shared state, between dispatch.c (streams, callbacks,
 * notification), life.c (subscribers, start-up, stream init and finish)
 * and ids.c (tools, ids, thread-local values).  Private to libxptifw.so. */
#ifndef XPTIFW_DISPATCH_H
#define XPTIFW_DISPATCH_H

#include "internal.h"

#define MAX_STREAMS 255 /* id 255 is XPTI_INVALID_STREAM_ID */
#define MAX_SUBSCRIBERS 64
#define MAX_TOOLS 255

struct cb_list; /* dispatch.c */

typedef struct stream {
  _Atomic(struct cb_list *) every; /* xptiRegisterStreamCallback: every trace type */
  _Atomic(const char *) name;      /* string table copy; NULL = not registered */
  _Atomic uint32_t active;         /* active callbacks on the stream */
  _Atomic uint32_t initialized, finalized;
} stream_t;

typedef struct subscriber {
  void *handle;
  const char *path;
  xpti_trace_init_fn_t init;
  xpti_trace_finish_fn_t finish;
} subscriber_t;

typedef struct fw_state {
  _Atomic bool enabled; /* the answer of xptiTraceEnabled */
  /* Some collector asked for xptraceThreadStamp: notifications count. */
  _Atomic bool stamps_used;
  /* Both of the above in one byte, for notification's one test:
   * GATE_ENABLED | GATE_STAMPS; the two flags stay for their readers. */
  _Atomic uint8_t gate;
  stream_t stream[256];
  /* Each stream's one active callback when it is stream-wide (a trace
   * collector's usual case): notification calls it after one load, its
   * index scaled by 8 in the load's addressing mode. */
  _Atomic(xpti_stream_callback_api_t) only[256];
  _Atomic uint32_t nstreams;
  _Atomic uint8_t default_stream;
  pthread_mutex_t lock; /* registration of streams, callbacks, tools */
  subscriber_t sub[MAX_SUBSCRIBERS];
  int nsubs;
  bool env_disabled;
  _Atomic bool default_announced; /* "xpti.framework" initialised */
} fw_state_t;
XPTIFW_HIDDEN extern fw_state_t g_fw;

#define GATE_ENABLED 1u
#define GATE_STAMPS 2u
XPTIFW_HIDDEN void fw_set_enabled(bool on);

/* dispatch.c: a registered stream by its interned name, or
 * XPTI_INVALID_STREAM_ID. */
XPTIFW_HIDDEN uint8_t stream_find(const char *table_name);
/* life.c: every subscriber's finish for the stream (not on a thread
 * already finishing it); the default stream registered again (xptiReset). */
XPTIFW_HIDDEN void stream_finish(const char *stream);
XPTIFW_HIDDEN void default_stream_register(void);
/* ids.c: tools, ids and this thread's values forgotten (xptiReset). */
XPTIFW_HIDDEN void ids_reset(void);

#endif
