/* libxptrace_mpi.so: what the MPI layer sends on the XPTI stream
 * "mpi.api" (C11, usable from C++).
 *
 * function_with_args_begin / _end around every traced MPI call, from the
 * calling thread, event NULL, instance = correlation id, user data =
 * xpt_mpi_call_t, laid out as XPTI's xpti_function_with_args_t
 * (function_id, function_name, args_data, ret_data, then the correlation
 * id in place of user_data), so any collector names the call with
 * xpti_user_data_name().
 *
 * Point-to-point messages are flows (xptrace_protocol.h): the layer sends
 * XPTRACE_FLOW_OUT before the begin of the call that posts a send and
 * XPTRACE_FLOW_IN before the end of the call that completes a receive;
 * both carry the same 64-bit id, computed on each side from (communicator,
 * source, destination, tag, order on that channel), so that the flow links
 * two processes without any message of ours. */
#ifndef XPTRACE_MPI_TRACING_H
#define XPTRACE_MPI_TRACING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XPT_MPI_STREAM "mpi.api"

/* Arguments of one call; fields that do not apply are -1 (ranks, tag,
 * size) or 0 (bytes, requests). */
typedef struct xpt_mpi_args_t {
  int32_t peer;        /* destination or source rank in comm (MPI_ANY_SOURCE as
                          given in begin, the actual source in end), or the root
                          of a rooted collective */
  int32_t tag;         /* as given; the actual tag in end */
  uint64_t bytes;      /* bytes this rank sends (receives for receives) */
  int32_t comm_size;   /* size of the communicator */
  int32_t rank;        /* this process's rank in the communicator */
  uint64_t comm_id;    /* the layer's id of the communicator, the same on every
                          member (0: MPI_COMM_WORLD) */
  uint64_t request;    /* request id made (Isend, Irecv ...) or, for waits and
                          tests, the first one completed; ids are
                          world rank << 40 | n, unique across the job */
  uint32_t requests;   /* requests completed by a wait or test (end) */
  uint32_t flows;      /* flows sent (begin) or received (end) by this call */
} xpt_mpi_args_t;

typedef struct xpt_mpi_call_t {
  uint32_t function_id;      /* index in the layer's list, stable per version */
  const char *function_name; /* "MPI_Send" */
  xpt_mpi_args_t *args;
  const int *return_value;   /* NULL in begin */
  uint64_t correlation_id;
} xpt_mpi_call_t;

#ifdef __cplusplus
}
#endif
#endif /* XPTRACE_MPI_TRACING_H */
