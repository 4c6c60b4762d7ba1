/* Internals shared by the MPI layer's files (libxptrace_mpi.so). */
#ifndef XPT_MPI_LAYER_H
#define XPT_MPI_LAYER_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "mpi_match.h"
#include "xptrace/mpi_tracing.h"

/* The traced functions, in the order of their ids (xpt_mpi_call_t). */
#define XPT_MPI_FUNCTIONS(X)                                                                 \
  X(MPI_Init) X(MPI_Init_thread) X(MPI_Finalize) X(MPI_Abort) X(MPI_Comm_rank)                \
  X(MPI_Comm_size) X(MPI_Comm_dup) X(MPI_Comm_split) X(MPI_Comm_split_type)                   \
  X(MPI_Comm_create) X(MPI_Comm_free) X(MPI_Send) X(MPI_Ssend) X(MPI_Bsend) X(MPI_Rsend)      \
  X(MPI_Recv) X(MPI_Isend) X(MPI_Issend) X(MPI_Ibsend) X(MPI_Irsend) X(MPI_Irecv)             \
  X(MPI_Sendrecv) X(MPI_Sendrecv_replace) X(MPI_Probe) X(MPI_Iprobe) X(MPI_Wait)              \
  X(MPI_Waitall) X(MPI_Waitany) X(MPI_Waitsome) X(MPI_Test) X(MPI_Testall) X(MPI_Testany)     \
  X(MPI_Testsome) X(MPI_Request_free) X(MPI_Cancel) X(MPI_Barrier) X(MPI_Bcast)               \
  X(MPI_Reduce) X(MPI_Allreduce) X(MPI_Gather) X(MPI_Gatherv) X(MPI_Scatter)                 \
  X(MPI_Scatterv) X(MPI_Allgather) X(MPI_Allgatherv) X(MPI_Alltoall) X(MPI_Alltoallv)         \
  X(MPI_Reduce_scatter) X(MPI_Reduce_scatter_block) X(MPI_Scan) X(MPI_Exscan)                 \
  X(MPI_Ibarrier) X(MPI_Ibcast) X(MPI_Ireduce) X(MPI_Iallreduce)

#define XPT_MPI_ID(name) XPT_MPI_FN_##name,
enum { XPT_MPI_FUNCTIONS(XPT_MPI_ID) XPT_MPI_FN_COUNT };
#undef XPT_MPI_ID

/* One traced call in progress: its user data and arguments. */
typedef struct layer_call {
  xpt_mpi_call_t c;
  xpt_mpi_args_t a;
  bool on;
} layer_call_t;

/* A communicator as the layer knows it. */
typedef struct layer_comm {
  MPI_Comm comm;
  uint64_t id;       /* the same on every member */
  int rank, size;
  bool inter;        /* intercommunicator: no flows */
  int *world;        /* world rank of each rank; NULL for MPI_COMM_WORLD */
  uint64_t children; /* communicators made from this one */
  struct layer_comm *next;
} layer_comm_t;

XPT_MPI_HIDDEN extern int layer_world_rank, layer_world_size;
/* Rank 0's random number, sent with its first clock answer: flows of
 * different jobs never share an id. */
XPT_MPI_HIDDEN extern uint64_t layer_job_salt;
XPT_MPI_HIDDEN extern xpt_mpi_chans_t layer_chans;
XPT_MPI_HIDDEN extern xpt_mpi_reqs_t layer_reqs;

/* Starts a call: true when someone listens (then fill c->a, send flows
 * out, and call layer_begin). */
XPT_MPI_HIDDEN bool layer_enter(layer_call_t *c, int fn);
XPT_MPI_HIDDEN void layer_begin(layer_call_t *c);
XPT_MPI_HIDDEN void layer_end(layer_call_t *c, int *rc);
/* A flow mark (dir 0 out, 1 in) on this thread, before begin / end. */
XPT_MPI_HIDDEN void layer_flow(layer_call_t *c, int dir, uint64_t id);
/* MPI_COMM_WORLD's facts, once MPI_Init returned. */
XPT_MPI_HIDDEN void layer_world_set(int rank, int size);
/* Communicator facts (cached); NULL for MPI_COMM_NULL or on failure. */
XPT_MPI_HIDDEN layer_comm_t *layer_comm(MPI_Comm comm);
/* Fill rank, size and comm id of the call's communicator. */
XPT_MPI_HIDDEN layer_comm_t *layer_args_comm(layer_call_t *c, MPI_Comm comm);
XPT_MPI_HIDDEN uint64_t layer_bytes(int count, MPI_Datatype type);
/* A new communicator made collectively from `parent` (NULL too). */
XPT_MPI_HIDDEN void layer_comm_made(MPI_Comm parent, MPI_Comm made);
XPT_MPI_HIDDEN void layer_comm_forget(MPI_Comm comm);
XPT_MPI_HIDDEN uint64_t layer_request_id(void);

/* Clock estimates (mpi_clock.c): at init (phase 0) and finalize (1). */
XPT_MPI_HIDDEN void layer_clock_sync(int phase);
XPT_MPI_HIDDEN void layer_clock_setup(void);
/* Whether the layer records (someone listens on mpi.api). */
XPT_MPI_HIDDEN bool layer_listened(void);

#endif
