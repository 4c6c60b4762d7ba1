/* The MPI layer's bookkeeping that needs no MPI (unit-tested on its own,
 * tests/mpi/test_mpi_match.c): message channels and flow ids, and the
 * table of requests in flight.
 *
 * A flow id names one message: (communicator id, world rank of the
 * source, world rank of the destination, tag, n), n = the message's
 * order on that channel, counted by the sender when it posts the send
 * and by the receiver when the receive completes.  MPI's non-overtaking
 * rule makes the n-th send on a channel match the n-th receive that
 * matched on that channel; receives on one channel are counted in the
 * order the layer sees them complete (a batch of a wait or test in
 * posting order), which is their matching order unless a program
 * completes two receives of one channel out of posting order. */
#ifndef XPT_MPI_MATCH_H
#define XPT_MPI_MATCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XPT_MPI_HIDDEN __attribute__((visibility("hidden")))

/* 64-bit with bit 63 set; the same in the sending and the receiving
 * process.  comm_id: the communicator's id mixed with the job's salt. */
XPT_MPI_HIDDEN uint64_t xpt_mpi_flow_id(uint64_t comm_id, int32_t src, int32_t dst, int32_t tag,
                                        uint64_t n);

/* Channel counters of one process: (comm, peer, tag, direction) -> count. */
typedef struct xpt_mpi_chan {
  uint64_t comm_id;
  int32_t peer, tag;
  uint32_t dir; /* 0 send, 1 receive; 2 = empty slot */
  uint64_t count;
} xpt_mpi_chan_t;

typedef struct xpt_mpi_chans {
  pthread_mutex_t lock;
  xpt_mpi_chan_t *slot;
  size_t cap, n;
} xpt_mpi_chans_t;

#define XPT_MPI_CHANS_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}

/* The next message's flow id on a channel (its count is bumped): dir 0 a
 * send from `me` to `peer`, 1 a receive by `me` from `peer` (world ranks).
 * 0 when out of memory. */
XPT_MPI_HIDDEN uint64_t xpt_mpi_chan_next(xpt_mpi_chans_t *c, uint64_t comm_id, int32_t me,
                                          int32_t peer, int32_t tag, int dir);
XPT_MPI_HIDDEN void xpt_mpi_chans_free(xpt_mpi_chans_t *c);

/* A request in flight, keyed by the MPI handle's bits. */
enum { XPT_MPI_REQ_SEND = 1, XPT_MPI_REQ_RECV = 2, XPT_MPI_REQ_OTHER = 3 };
typedef struct xpt_mpi_req {
  uint64_t key;     /* the handle; 0 = empty slot */
  uint64_t id;      /* the layer's request id */
  uint64_t flow;    /* send: its flow id */
  uint64_t comm_id; /* receive: what the completion needs */
  const void *comm; /* receive: the MPI_Comm handle */
  uint64_t bytes;
  uint32_t kind;
} xpt_mpi_req_t;

typedef struct xpt_mpi_reqs {
  pthread_mutex_t lock;
  xpt_mpi_req_t *slot;
  size_t cap, n;
} xpt_mpi_reqs_t;

#define XPT_MPI_REQS_INIT {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0}

/* Add (or replace) the request r->key; false when out of memory. */
XPT_MPI_HIDDEN bool xpt_mpi_req_put(xpt_mpi_reqs_t *t, const xpt_mpi_req_t *r);
/* Copy the request `key` into *out; remove it unless `keep`.  False when
 * unknown (a request the layer did not see made). */
XPT_MPI_HIDDEN bool xpt_mpi_req_take(xpt_mpi_reqs_t *t, uint64_t key, bool keep,
                                     xpt_mpi_req_t *out);
XPT_MPI_HIDDEN size_t xpt_mpi_req_count(xpt_mpi_reqs_t *t);
XPT_MPI_HIDDEN void xpt_mpi_reqs_free(xpt_mpi_reqs_t *t);

#endif
