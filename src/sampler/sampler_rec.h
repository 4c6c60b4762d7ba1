/* xptrace timer sampler — the recording file (`samples.xsamp`), written
 * by the preloaded library into a shared mapping of a file in the output
 * folder, read by the launcher (`xptrace sample`, `run --sample`,
 * `finish`) after the program ended, however it ended.
 *
 * Layout: a header of SREC_HEADER_SIZE bytes, then `nchunks` chunks of
 * `chunk_size` bytes.  A chunk is taken whole by one writer (a sampled
 * thread, or the metadata writer) with one atomic add on `next_chunk`; a
 * chunk holds whole records, and the reader trusts its first `used` bytes
 * (stored with release after each record).  A thread that ends hands its
 * partly used chunk to the next thread, so records carry their thread.
 * Records are 8-byte aligned; `size` is the whole record. */
#ifndef XPTRACE_SAMPLER_REC_H
#define XPTRACE_SAMPLER_REC_H

#include <stdatomic.h>
#include <stdint.h>

#define SREC_MAGIC "XPTSAMP1"
#define SREC_FILE "samples.xsamp"
enum {
  SREC_VERSION = 1,
  SREC_HEADER_SIZE = 8192,
  SREC_CHUNK_HEADER = 8,
  SAMPLER_REC_MAX_DEPTH = 512, /* SAMPLER_MAX_DEPTH */
  SREC_MAX_BUILD_ID = 64,
};

/* Header flags. */
enum {
  SREC_FLAG_EXITED = 1u << 0,       /* the process ran its exit handlers */
  SREC_FLAG_SIGPROF_TAKEN = 1u << 1, /* the program set its own SIGPROF action */
  SREC_FLAG_RT_TAKEN = 1u << 2,      /* ... its own action for the real-time signal */
  SREC_FLAG_SIGPROF_HELD = 1u << 3,  /* SIGPROF had a handler when we loaded */
  SREC_FLAG_FORKED = 1u << 4,        /* a forked child of a sampled process */
  SREC_FLAG_EXECED = 1u << 5,        /* exec'd by a sampled process */
  SREC_FLAG_NO_TIMER = 1u << 6,      /* timer_create failed for a thread */
  SREC_FLAG_PERIODS = 1u << 7,       /* sampling only inside time windows */
};

typedef struct srec_header {
  char magic[8];
  uint32_t version, header_size;
  uint32_t chunk_size, nchunks;
  _Atomic uint32_t next_chunk; /* chunks taken (may run past nchunks) */
  _Atomic uint32_t reserved;   /* chunks whose blocks are allocated */
  _Atomic uint32_t flags;
  int32_t pid, ppid;
  uint32_t depth;
  uint8_t clock_on[2]; /* cputime, realtime */
  uint8_t pad[6];
  double freq[2];
  uint64_t start_ns, start_cpu_ns; /* CLOCK_MONOTONIC, process CPU time at load */
  _Atomic uint64_t end_ns;         /* at exit (0: did not exit normally) */
  _Atomic uint64_t end_cpu_ns;
  _Atomic uint64_t lost;           /* samples with no room or no thread */
  char program[64];                /* short name */
  char exe[4096];                  /* /proc/self/exe at load */
} srec_header_t;
_Static_assert(sizeof(srec_header_t) <= SREC_HEADER_SIZE, "header fits");

typedef struct srec_chunk {
  _Atomic uint32_t used; /* bytes of records after this header */
  uint32_t owner;        /* SREC_OWNER_*: meta chunks are read in index order */
} srec_chunk_t;

enum srec_kind {
  SREC_SAMPLE = 1,
  SREC_THREAD = 2,     /* a thread starts being sampled */
  SREC_THREAD_END = 3, /* ... stops: its CPU time */
  SREC_MAP = 4,        /* an executable mapping appears */
  SREC_UNMAP = 5,      /* every mapping of (path, bias) goes (dlclose) */
};

/* srec_sample_t.truncated bit 1: CPU time charged at the thread's end to
 * its start routine (periods the kernel's tick did not deliver). */
enum { SREC_SAMPLE_CHARGED = 2 };

/* srec_chunk_t.owner */
enum { SREC_OWNER_THREADS = 1, SREC_OWNER_META = 2 };

typedef struct srec_any {
  uint16_t kind, size;
  uint32_t thread;
} srec_any_t;

typedef struct srec_sample {
  uint16_t kind, size;
  uint32_t thread;   /* index: 0 the main thread */
  uint64_t time_ns;
  uint32_t weight;   /* 1 + timer overruns */
  uint8_t clock;     /* 0 cputime, 1 realtime */
  uint8_t truncated; /* bit 0: deeper than the depth limit; SREC_SAMPLE_CHARGED */
  uint16_t depth;
  uint64_t pc[];     /* innermost first */
} srec_sample_t;

typedef struct srec_thread {
  uint16_t kind, size;
  uint32_t thread;
  uint64_t time_ns;
  int32_t tid;
  uint8_t sigprof_blocked; /* at its end, SIGPROF was blocked */
  uint8_t pad[3];
  uint64_t cpu_ns;         /* THREAD_END: the thread's CPU time */
  uint64_t weight[2];      /* THREAD_END: weighted samples per clock */
  char name[16];
} srec_thread_t;

typedef struct srec_map {
  uint16_t kind, size;
  uint32_t thread;
  uint64_t time_ns;
  uint64_t start, end, offset; /* file offset of `start`; UNMAP: 0 */
  uint64_t bias;               /* the object's load bias (l_addr) */
  char path[];                 /* NUL-terminated; then, when the record has room, one
                                * byte n and n bytes of the object's GNU build id
                                * (n = 0: none; older recordings: zero padding) */
} srec_map_t;

#endif /* XPTRACE_SAMPLER_REC_H */
