/* The MPI layer: start and end of MPI, communicators and collectives
 * (marked with their root and the bytes this rank contributes). */
#include <stdlib.h>

#include "mpi_layer.h"

/* MPI_Init / MPI_Init_thread: the slice, then the first clock estimate. */
static int layer_init_common(int fn, int *argc, char ***argv, int required, int *provided) {
  layer_call_t c;
  bool on = layer_enter(&c, fn);
  if (on)
    layer_begin(&c);
  int rc = fn == XPT_MPI_FN_MPI_Init ? PMPI_Init(argc, argv)
                                     : PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) {
    PMPI_Comm_rank(MPI_COMM_WORLD, &layer_world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &layer_world_size);
    layer_world_set(layer_world_rank, layer_world_size);
  }
  if (on) {
    layer_args_comm(&c, MPI_COMM_WORLD);
    layer_end(&c, &rc);
  }
  /* Collective over MPI_COMM_WORLD: every rank runs it, listened or not
   * (a rank whose stream is off still answers the others). */
  if (rc == MPI_SUCCESS)
    layer_clock_sync(0);
  return rc;
}

int MPI_Init(int *argc, char ***argv) {
  return layer_init_common(XPT_MPI_FN_MPI_Init, argc, argv, 0, NULL);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  return layer_init_common(XPT_MPI_FN_MPI_Init_thread, argc, argv, required, provided);
}

int MPI_Finalize(void) {
  layer_clock_sync(1);
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Finalize))
    return PMPI_Finalize();
  layer_args_comm(&c, MPI_COMM_WORLD);
  layer_begin(&c);
  int rc = PMPI_Finalize();
  layer_end(&c, &rc);
  return rc;
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
  layer_call_t c;
  if (layer_enter(&c, XPT_MPI_FN_MPI_Abort)) {
    layer_args_comm(&c, comm);
    layer_begin(&c); /* no end: MPI_Abort does not return */
  }
  return PMPI_Abort(comm, errorcode);
}

int MPI_Comm_rank(MPI_Comm comm, int *rank) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Comm_rank))
    return PMPI_Comm_rank(comm, rank);
  layer_args_comm(&c, comm);
  layer_begin(&c);
  int rc = PMPI_Comm_rank(comm, rank);
  layer_end(&c, &rc);
  return rc;
}

int MPI_Comm_size(MPI_Comm comm, int *size) {
  layer_call_t c;
  if (!layer_enter(&c, XPT_MPI_FN_MPI_Comm_size))
    return PMPI_Comm_size(comm, size);
  layer_args_comm(&c, comm);
  layer_begin(&c);
  int rc = PMPI_Comm_size(comm, size);
  layer_end(&c, &rc);
  return rc;
}

/* Communicator constructors: the new one gets an id every member agrees
 * on, whether or not this call is traced. */
#define LAYER_COMM_MAKER(name, call, comm, out)                                               \
  layer_call_t c;                                                                            \
  bool on = layer_enter(&c, XPT_MPI_FN_##name);                                              \
  if (on) {                                                                                  \
    layer_args_comm(&c, comm);                                                               \
    layer_begin(&c);                                                                         \
  }                                                                                          \
  int rc = call;                                                                             \
  if (rc == MPI_SUCCESS && out)                                                              \
    layer_comm_made(comm, *(out));                                                           \
  if (on)                                                                                    \
    layer_end(&c, &rc);                                                                      \
  return rc;

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
  LAYER_COMM_MAKER(MPI_Comm_dup, PMPI_Comm_dup(comm, newcomm), comm, newcomm)
}
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  LAYER_COMM_MAKER(MPI_Comm_split, PMPI_Comm_split(comm, color, key, newcomm), comm, newcomm)
}
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm) {
  LAYER_COMM_MAKER(MPI_Comm_split_type, PMPI_Comm_split_type(comm, type, key, info, newcomm),
                   comm, newcomm)
}
int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
  LAYER_COMM_MAKER(MPI_Comm_create, PMPI_Comm_create(comm, group, newcomm), comm, newcomm)
}

int MPI_Comm_free(MPI_Comm *comm) {
  layer_call_t c;
  MPI_Comm was = comm ? *comm : MPI_COMM_NULL;
  bool on = layer_enter(&c, XPT_MPI_FN_MPI_Comm_free);
  if (on) {
    layer_args_comm(&c, was);
    layer_begin(&c);
  }
  int rc = PMPI_Comm_free(comm);
  if (rc == MPI_SUCCESS)
    layer_comm_forget(was);
  if (on)
    layer_end(&c, &rc);
  return rc;
}

/* ---- collectives ------------------------------------------------------ */

/* Opens a collective's slice: root (-1: none) and bytes this rank sends. */
#define LAYER_COLL(name, comm_, root_, bytes_, call)                                           \
  layer_call_t c;                                                                            \
  if (!layer_enter(&c, XPT_MPI_FN_##name))                                                   \
    return call;                                                                             \
  layer_args_comm(&c, comm_);                                                                \
  c.a.peer = (root_);                                                                        \
  c.a.bytes = (bytes_);                                                                      \
  layer_begin(&c);                                                                           \
  int rc = call;                                                                             \
  layer_end(&c, &rc);                                                                        \
  return rc;

/* Collectives that make a request: its id in the slice. */
#define LAYER_ICOLL(name, comm_, root_, bytes_, call, req)                                     \
  layer_call_t c;                                                                            \
  if (!layer_enter(&c, XPT_MPI_FN_##name))                                                   \
    return call;                                                                             \
  layer_args_comm(&c, comm_);                                                                \
  c.a.peer = (root_);                                                                        \
  c.a.bytes = (bytes_);                                                                      \
  c.a.request = layer_request_id();                                                          \
  layer_begin(&c);                                                                           \
  int rc = call;                                                                             \
  if (rc == MPI_SUCCESS && req) {                                                            \
    xpt_mpi_req_t r = {(uint64_t)(uintptr_t) * (req), c.a.request, 0, c.a.comm_id, NULL,     \
                       c.a.bytes, XPT_MPI_REQ_OTHER};                                        \
    (void)xpt_mpi_req_put(&layer_reqs, &r);                                                  \
  }                                                                                          \
  layer_end(&c, &rc);                                                                        \
  return rc;

static uint64_t layer_sum_bytes(const int counts[], MPI_Datatype type, MPI_Comm comm) {
  int n = 0;
  if (!counts || PMPI_Comm_size(comm, &n) != MPI_SUCCESS)
    return 0;
  uint64_t sum = 0;
  for (int i = 0; i < n; i++)
    sum += layer_bytes(counts[i], type);
  return sum;
}

int MPI_Barrier(MPI_Comm comm) { LAYER_COLL(MPI_Barrier, comm, -1, 0, PMPI_Barrier(comm)) }

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  LAYER_COLL(MPI_Bcast, comm, root, layer_bytes(count, type),
             PMPI_Bcast(buf, count, type, root, comm))
}

int MPI_Reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm) {
  LAYER_COLL(MPI_Reduce, comm, root, layer_bytes(count, type),
             PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm))
}

int MPI_Allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
  LAYER_COLL(MPI_Allreduce, comm, -1, layer_bytes(count, type),
             PMPI_Allreduce(sbuf, rbuf, count, type, op, comm))
}

int MPI_Gather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm) {
  LAYER_COLL(MPI_Gather, comm, root, layer_bytes(scount, stype),
             PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm))
}

int MPI_Gatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                MPI_Comm comm) {
  LAYER_COLL(MPI_Gatherv, comm, root, layer_bytes(scount, stype),
             PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm))
}

int MPI_Scatter(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm) {
  /* The root sends scount to every rank; the others send nothing. */
  LAYER_COLL(MPI_Scatter, comm, root,
             c.a.rank == root ? layer_bytes(scount, stype) * (uint64_t)c.a.comm_size : 0,
             PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm))
}

int MPI_Scatterv(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm) {
  LAYER_COLL(MPI_Scatterv, comm, root,
             c.a.rank == root ? layer_sum_bytes(scounts, stype, comm) : 0,
             PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm))
}

int MPI_Allgather(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm) {
  LAYER_COLL(MPI_Allgather, comm, -1, layer_bytes(scount, stype),
             PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm))
}

int MPI_Allgatherv(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm) {
  LAYER_COLL(MPI_Allgatherv, comm, -1, layer_bytes(scount, stype),
             PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm))
}

int MPI_Alltoall(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm) {
  LAYER_COLL(MPI_Alltoall, comm, -1,
             layer_bytes(scount, stype) * (uint64_t)(c.a.comm_size > 0 ? c.a.comm_size : 0),
             PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm))
}

int MPI_Alltoallv(const void *sbuf, const int scounts[], const int sdispls[], MPI_Datatype stype,
                  void *rbuf, const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                  MPI_Comm comm) {
  LAYER_COLL(MPI_Alltoallv, comm, -1, layer_sum_bytes(scounts, stype, comm),
             PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm))
}

int MPI_Reduce_scatter(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type,
                       MPI_Op op, MPI_Comm comm) {
  LAYER_COLL(MPI_Reduce_scatter, comm, -1, layer_sum_bytes(rcounts, type, comm),
             PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm))
}

int MPI_Reduce_scatter_block(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm) {
  LAYER_COLL(MPI_Reduce_scatter_block, comm, -1,
             layer_bytes(rcount, type) * (uint64_t)(c.a.comm_size > 0 ? c.a.comm_size : 0),
             PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm))
}

int MPI_Scan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm) {
  LAYER_COLL(MPI_Scan, comm, -1, layer_bytes(count, type),
             PMPI_Scan(sbuf, rbuf, count, type, op, comm))
}

int MPI_Exscan(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
  LAYER_COLL(MPI_Exscan, comm, -1, layer_bytes(count, type),
             PMPI_Exscan(sbuf, rbuf, count, type, op, comm))
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
  LAYER_ICOLL(MPI_Ibarrier, comm, -1, 0, PMPI_Ibarrier(comm, req), req)
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request *req) {
  LAYER_ICOLL(MPI_Ibcast, comm, root, layer_bytes(count, type),
              PMPI_Ibcast(buf, count, type, root, comm, req), req)
}

int MPI_Ireduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *req) {
  LAYER_ICOLL(MPI_Ireduce, comm, root, layer_bytes(count, type),
              PMPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, req), req)
}

int MPI_Iallreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req) {
  LAYER_ICOLL(MPI_Iallreduce, comm, -1, layer_bytes(count, type),
              PMPI_Iallreduce(sbuf, rbuf, count, type, op, comm, req), req)
}
