/* xptrace sample --method perf: kernel cpu-clock sampling of a child
 * process tree with copies of the user stacks, unwound by the launcher
 * and handed to the sample session (docs/sampler.md). */
#include "sample_perf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "counters.h"
#include "xptrace_cmds.h"
#include "sample_perf_unwind.h"
#include "samples.h"

typedef struct perf_state {
  xs_session_t *session;
  unw_t *unw;
  const sample_perf_opts_t *o;
  uint64_t *pcs;
  uint64_t lost, throttled, cut;
  struct live { pid_t pid, tid; } *live; /* running threads, for their CPU times */
  size_t nlive, cap_live, next_live;
} perf_state_t;

/* ---- threads' CPU times ------------------------------------------------------ */

/* Each thread's CPU time, for the diagnostics, read from /proc by the
 * launcher while the thread runs: a few threads per round, in turn, so
 * the last value may be up to a few rounds old. Not inherit_stat's READ
 * record at thread exit: with inherit_stat on any event of the program
 * (the sampling one or a counter beside it), Linux 6.18 here stopped
 * sampling a thread for the rest of its run in 19 of 42 runs of 4 kHz
 * sampling next to 500 short sibling threads; none of 50 without it. */
enum { LIVE_PER_ROUND = 32 };

static void live_add(perf_state_t *s, pid_t pid, pid_t tid) {
  if (s->nlive == s->cap_live) {
    size_t cap = s->cap_live ? 2 * s->cap_live : 64;
    struct live *l = realloc(s->live, cap * sizeof *l);
    if (!l)
      return; /* that thread's CPU time stays unknown */
    s->live = l;
    s->cap_live = cap;
  }
  s->live[s->nlive++] = (struct live){pid, tid};
}

static void live_remove(perf_state_t *s, size_t i) {
  s->live[i] = s->live[--s->nlive];
}

static void live_exit(perf_state_t *s, pid_t tid) {
  for (size_t i = 0; i < s->nlive; ++i)
    if (s->live[i].tid == tid) {
      live_remove(s, i);
      return;
    }
}

static void live_refresh(perf_state_t *s) {
  for (size_t k = 0; k < LIVE_PER_ROUND && s->nlive; ++k) {
    size_t i = s->next_live++ % s->nlive;
    uint64_t ns = counters_thread_cpu_ns(s->live[i].pid, s->live[i].tid);
    if (ns == UINT64_MAX)
      live_remove(s, i); /* gone before its EXIT record was read */
    else
      xs_thread_cpu(s->session, s->live[i].pid, s->live[i].tid, ns);
  }
}

/* ---- records ------------------------------------------------------------ */

/* Non-sample records end with sample_id_all's {pid, tid, time}. */
static uint64_t record_time(const struct perf_event_header *h) {
  const unsigned char *p = (const unsigned char *)h;
  if (h->type == PERF_RECORD_SAMPLE) {
    uint64_t t;
    memcpy(&t, p + sizeof *h + 16, 8);
    return t;
  }
  if (h->size < sizeof *h + 16)
    return 0;
  uint64_t t;
  memcpy(&t, p + h->size - 8, 8);
  return t;
}

static bool take(const unsigned char **p, const unsigned char *end, void *out, size_t n) {
  if ((size_t)(end - *p) < n)
    return false;
  memcpy(out, *p, n);
  *p += n;
  return true;
}

static void on_sample(perf_state_t *s, const unsigned char *p, const unsigned char *end) {
  struct {
    uint64_t ip;
    uint32_t pid, tid;
    uint64_t time;
  } h;
  if (!take(&p, end, &h, sizeof h))
    return;
  size_t max = s->o->depth;
  size_t n = 0;
  bool truncated = false;
  if (s->o->fp) {
    uint64_t nr;
    if (!take(&p, end, &nr, 8) || nr > (uint64_t)(end - p) / 8)
      return;
    for (uint64_t i = 0; i < nr; ++i) {
      uint64_t pc;
      memcpy(&pc, p + 8 * i, 8);
      if (pc >= (uint64_t)PERF_CONTEXT_MAX)
        continue; /* PERF_CONTEXT_USER and its kin mark, not frames */
      if (n == max) {
        truncated = true;
        break;
      }
      s->pcs[n++] = pc;
    }
    if (n == 0)
      s->pcs[n++] = h.ip;
  } else {
    uint64_t abi, regs[UNW_NREGS], size = 0, dyn = 0;
    const unsigned char *stack = NULL;
    if (!take(&p, end, &abi, 8))
      return;
    if (abi != PERF_SAMPLE_REGS_ABI_NONE && !take(&p, end, regs, sizeof regs))
      return;
    if (take(&p, end, &size, 8) && size && size <= (uint64_t)(end - p)) {
      stack = p;
      p += size;
      if (!take(&p, end, &dyn, 8) || dyn > size)
        dyn = size;
    }
    if (abi == PERF_SAMPLE_REGS_ABI_NONE) {
      s->pcs[n++] = h.ip; /* no user registers: a kernel thread's sample */
    } else {
      unw_result_t r;
      n = unw_stack(s->unw, (pid_t)h.pid, (pid_t)h.tid, regs, stack, stack ? dyn : 0, s->pcs, max, &r);
      truncated = r == UNW_TRUNCATED;
      s->cut += r == UNW_CUT;
    }
  }
  xs_sample(s->session, XS_CPUTIME, (pid_t)h.pid, (pid_t)h.tid, h.time, 1, s->pcs, n, truncated);
}

static void on_record(perf_state_t *s, const struct perf_event_header *hdr) {
  const unsigned char *p = (const unsigned char *)(hdr + 1);
  const unsigned char *end = (const unsigned char *)hdr + hdr->size;
  uint64_t t = record_time(hdr);
  uint32_t ids[4];
  switch (hdr->type) {
  case PERF_RECORD_SAMPLE: on_sample(s, p, end); break;
  case PERF_RECORD_MMAP2: {
    struct {
      uint32_t pid, tid;
      uint64_t addr, len, pgoff;
      unsigned char ids[24];
      uint32_t prot, flags;
    } m;
    if (end - p <= (ptrdiff_t)sizeof m + 16)
      return;
    memcpy(&m, p, sizeof m);
    char name[PATH_MAX];
    size_t room = (size_t)(end - 16 - (p + sizeof m));
    snprintf(name, sizeof name, "%.*s", (int)(room < sizeof name ? room : sizeof name - 1),
             (const char *)(p + sizeof m));
    /* Kernels >= 5.12 give the build id in place of device and inode. */
    const uint8_t *bid = NULL;
    size_t bid_len = 0;
    if ((hdr->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) && m.ids[0] <= 20) {
      bid = m.ids + 4;
      bid_len = m.ids[0];
    }
    if (!(m.prot & PROT_EXEC))
      return; /* code only: data mappings never hold a frame */
    xs_mapping(s->session, (pid_t)m.pid, t, m.addr, m.addr + m.len, m.pgoff, name, bid, bid_len);
    unw_mapping(s->unw, (pid_t)m.pid, m.addr, m.addr + m.len, m.pgoff, name);
    break;
  }
  case PERF_RECORD_COMM: {
    if (end - p <= 8 + 16)
      return;
    memcpy(ids, p, 8);
    char comm[32];
    snprintf(comm, sizeof comm, "%.*s", (int)(end - 16 - (p + 8)), (const char *)(p + 8));
    bool exec = hdr->misc & PERF_RECORD_MISC_COMM_EXEC;
    if (ids[0] == ids[1] || exec)
      xs_process_name(s->session, (pid_t)ids[0], t, comm, exec);
    xs_thread(s->session, (pid_t)ids[0], (pid_t)ids[1], t, comm);
    if (exec)
      unw_exec(s->unw, (pid_t)ids[0]); /* a new program image */
    break;
  }
  case PERF_RECORD_FORK: {
    if (end - p < 16)
      return;
    memcpy(ids, p, 16); /* pid, ppid, tid, ptid */
    live_add(s, (pid_t)ids[0], (pid_t)ids[2]);
    if (ids[0] != ids[1]) {
      /* A new process starts with a copy of its parent's mappings. */
      xs_process(s->session, (pid_t)ids[0], (pid_t)ids[1], t);
      unw_fork(s->unw, (pid_t)ids[1], (pid_t)ids[0]);
    }
    xs_thread(s->session, (pid_t)ids[0], (pid_t)ids[2], t, NULL); /* numbers in creation order */
    break;
  }
  case PERF_RECORD_EXIT:
    if (end - p >= 16) {
      memcpy(ids, p, 16);
      live_exit(s, (pid_t)ids[2]);
      if (ids[0] == ids[2])
        unw_exit(s->unw, (pid_t)ids[0]);
    }
    break;
  case PERF_RECORD_LOST:
    if (end - p >= 16) {
      uint64_t lost[2];
      memcpy(lost, p, 16);
      s->lost += lost[1];
    }
    break;
  case PERF_RECORD_THROTTLE: ++s->throttled; break;
  default: break;
  }
}

/* ---- ring buffers --------------------------------------------------------- */

typedef struct ring {
  int fd;
  struct perf_event_mmap_page *meta;
  unsigned char *data;
  size_t size, map_size;
} ring_t;

typedef struct batch {
  struct perf_event_header **rec;
  size_t n, cap;
} batch_t;

/* Copy every record out of a ring (they may wrap) and free its space. */
static void ring_drain(ring_t *r, batch_t *b) {
  uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = r->meta->data_tail;
  while (tail + sizeof(struct perf_event_header) <= head) {
    struct perf_event_header hdr;
    size_t off = tail & (r->size - 1);
    memcpy(&hdr, r->data + off, sizeof hdr); /* 8-aligned: never split */
    if (hdr.size < sizeof hdr || tail + hdr.size > head)
      break;
    struct perf_event_header *copy = malloc(hdr.size);
    if (copy) {
      size_t first = r->size - off < hdr.size ? r->size - off : hdr.size;
      memcpy(copy, r->data + off, first);
      memcpy((unsigned char *)copy + first, r->data, hdr.size - first);
      if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        void *rec = realloc(b->rec, cap * sizeof *b->rec);
        if (rec) {
          b->rec = rec;
          b->cap = cap;
        }
      }
      if (b->n < b->cap)
        b->rec[b->n++] = copy;
      else
        free(copy);
    }
    tail += hdr.size;
  }
  __atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

static int record_cmp(const void *a, const void *b) {
  uint64_t x = record_time(*(struct perf_event_header *const *)a);
  uint64_t y = record_time(*(struct perf_event_header *const *)b);
  return x < y ? -1 : x > y;
}

/* One round: all rings, then the records in time order, so that a FORK or
 * MMAP2 seen on one CPU comes before the samples that need it on another. */
static void drain_all(perf_state_t *s, ring_t *rings, size_t n) {
  batch_t b = {0};
  for (size_t i = 0; i < n; ++i)
    ring_drain(&rings[i], &b);
  if (b.n)
    qsort(b.rec, b.n, sizeof *b.rec, record_cmp);
  for (size_t i = 0; i < b.n; ++i) {
    on_record(s, b.rec[i]);
    free(b.rec[i]);
  }
  free(b.rec);
}

/* ---- opening the events ----------------------------------------------------- */

static long read_sysctl(const char *name, long fallback) {
  char path[128];
  snprintf(path, sizeof path, "/proc/sys/kernel/%s", name);
  FILE *f = fopen(path, "r");
  long v = fallback;
  if (f) {
    if (fscanf(f, "%ld", &v) != 1)
      v = fallback;
    fclose(f);
  }
  return v;
}

/* The sampling period in ns of cpu-clock for a rate, within the kernel's
 * limit (kernel.perf_event_max_sample_rate). */
static double effective_hz(const sample_perf_opts_t *o) {
  double max_rate = (double)read_sysctl("perf_event_max_sample_rate", 100000);
  return o->hz < max_rate ? o->hz : max_rate;
}

static void make_attr(const sample_perf_opts_t *o, struct perf_event_attr *a, bool build_id) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->type = PERF_TYPE_SOFTWARE;
  a->config = PERF_COUNT_SW_CPU_CLOCK;
  /* A fixed period of CPU time (ns): every sample weighs the same. */
  double period = 1e9 / effective_hz(o);
  a->sample_period = period < 1000 ? 1000 : (uint64_t)period;
  a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  if (o->fp) {
    a->sample_type |= PERF_SAMPLE_CALLCHAIN;
    long max_stack = read_sysctl("perf_event_max_stack", 127);
    a->sample_max_stack = (uint16_t)((long)o->depth + 1 < max_stack ? (long)o->depth + 1 : max_stack);
  } else {
    a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    a->sample_regs_user = UNW_REGS_MASK;
    a->sample_stack_user = o->stack_size;
  }
  a->disabled = 1;
  a->inherit = 1;
  a->enable_on_exec = 1;
  a->exclude_kernel = 1; /* what perf_event_paranoid 2 allows; user time only */
  a->exclude_hv = 1;
  a->exclude_callchain_kernel = 1;
  a->mmap = 1; /* counted by the kernel only with mmap set; mmap2 picks the record */
  a->mmap2 = 1;
  a->build_id = build_id;
  a->comm = 1;
  a->comm_exec = 1;
  a->task = 1;
  a->sample_id_all = 1;
  a->use_clockid = 1;
  a->clockid = CLOCK_MONOTONIC;
  a->watermark = 1;
}

static int perf_open(struct perf_event_attr *a, pid_t pid, int cpu) {
  return (int)syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* A seccomp filter on us (containers): the likelier cause of a refusal
 * when perf_event_paranoid allows the call. */
static bool seccomp_filtered(void) {
  FILE *f = fopen("/proc/self/status", "re");
  char line[256];
  long mode = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Seccomp: %ld", &mode) == 1)
      break;
  if (f)
    fclose(f);
  return mode == 2;
}

bool sample_perf_available(const sample_perf_opts_t *o, char *why, size_t len) {
  struct perf_event_attr a;
  make_attr(o, &a, false);
  int fd = perf_open(&a, 0, -1);
  if (fd >= 0) {
    close(fd);
    return true;
  }
  int err = errno;
  snprintf(why, len, "perf_event_open refused (%s; kernel.perf_event_paranoid=%ld%s)", strerror(err),
           read_sysctl("perf_event_paranoid", -9),
           seccomp_filtered() ? "; a seccomp filter is on, as in containers" : "");
  return false;
}

/* One event per CPU: inherit with a ring buffer needs per-CPU events. */
static size_t open_rings(const sample_perf_opts_t *o, pid_t pid, ring_t **out, int *err) {
  struct perf_event_attr a;
  make_attr(o, &a, true);
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  /* Room for a few hundred samples with their stack copies per CPU. */
  size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = o->fp ? 128 : 1024;
  ring_t *rings = calloc(ncpu > 0 ? (size_t)ncpu : 1, sizeof *rings);
  size_t n = 0;
  *err = 0;
  for (long cpu = 0; rings && cpu < ncpu; ++cpu) {
    int fd = perf_open(&a, pid, (int)cpu);
    if (fd < 0 && errno == EINVAL && a.build_id) {
      a.build_id = 0; /* kernels before 5.12: build ids read from the files */
      fd = perf_open(&a, pid, (int)cpu);
    }
    if (fd < 0) {
      if (errno != ENODEV && errno != EINVAL) /* offline CPUs */
        *err = errno;
      continue;
    }
    void *m = MAP_FAILED;
    /* The locked-memory allowance (perf_event_mlock_kb) may be small. */
    for (; pages >= 1; pages /= 2) {
      m = mmap(NULL, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED || errno != EPERM)
        break;
    }
    if (m == MAP_FAILED) {
      *err = errno;
      close(fd);
      continue;
    }
    rings[n++] = (ring_t){fd, m, (unsigned char *)m + page, pages * page, (pages + 1) * page};
  }
  *out = rings;
  return n;
}

/* ---- running --------------------------------------------------------------- */

int sample_perf_run(char **command, const sample_perf_opts_t *o, void (*after)(const void *),
                    const void *ctx) {
  if (o->verbose) {
    fputs("xptrace: running", stderr);
    for (char **a = command; *a; ++a)
      fprintf(stderr, " %s", *a);
    fputc('\n', stderr);
  }
  struct sigaction ignore = {.sa_handler = SIG_IGN};
  struct sigaction old_int, old_quit;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) {
    fprintf(stderr, "xptrace: cannot start %s: %s\n", command[0], strerror(errno));
    return 1;
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "xptrace: cannot start %s: %s\n", command[0], strerror(errno));
    return 1;
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    close(go[1]);
    char c;
    /* Wait until the events are open: enable_on_exec then covers exec. */
    while (read(go[0], &c, 1) < 0 && errno == EINTR)
      ;
    execvp(command[0], command);
    fprintf(stderr, "xptrace: cannot run %s: %s\n", command[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
  }
  close(go[0]);
  launch_forward_signals(pid);

  const char *base = strrchr(command[0], '/');
  xs_options_t so = {o->dir,     command[0], "perf", effective_hz(o), o->depth, o->demangle, true,
                     false,      NULL,       0,      {effective_hz(o), 0}};
  perf_state_t s = {.session = xs_session_new(&so), .unw = o->fp ? NULL : unw_new(), .o = o};
  s.pcs = calloc(o->depth ? o->depth : 1, sizeof *s.pcs);
  if (!s.session || (!o->fp && !s.unw) || !s.pcs) {
    /* Out of memory at start: the command still runs, unsampled. */
    fprintf(stderr, "xptrace sample: out of memory; %s runs unsampled\n", command[0]);
  } else {
    xs_root(s.session, pid);
    xs_process(s.session, pid, 0, 0);
    live_add(&s, pid, pid);
    /* The exec's COMM record may come before the events are enabled. */
    xs_process_name(s.session, pid, 0, base ? base + 1 : command[0], false);
  }
  ring_t *rings = NULL;
  int err = 0;
  size_t nrings = s.pcs && s.session ? open_rings(o, pid, &rings, &err) : 0;
  if (nrings == 0)
    fprintf(stderr, "xptrace sample: cannot sample %s: perf_event_open: %s\n", command[0],
            strerror(err ? err : ENODEV));
  struct pollfd *pfd = calloc(nrings ? nrings : 1, sizeof *pfd);
  for (size_t i = 0; pfd && i < nrings; ++i)
    pfd[i] = (struct pollfd){.fd = rings[i].fd, .events = POLLIN};
  if (write(go[1], "g", 1) < 0) {
    /* The child sees end of file and runs anyway. */
  }
  close(go[1]);

  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  for (;;) {
    /* Ended: its main thread's CPU time is read while it is a zombie,
     * then it is reaped (reaping in the same step as the check lost the
     * time when it ended between the two calls). */
    siginfo_t si;
    si.si_pid = 0;
    int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && si.si_pid == pid) {
      if (s.session)
        xs_thread_cpu(s.session, pid, pid, counters_thread_cpu_ns(pid, pid));
      pid_t w;
      while ((w = wait4(pid, &status, 0, &ru)) < 0 && errno == EINTR)
        ;
      if (w == pid)
        break;
    }
    if ((r < 0 && errno != EINTR) || (r == 0 && si.si_pid == pid)) {
      fprintf(stderr, "xptrace: lost %s: %s\n", command[0], strerror(errno));
      status = 1 << 8;
      break;
    }
    if (pfd && nrings)
      poll(pfd, nrings, 50);
    else
      usleep(50000);
    drain_all(&s, rings, nrings);
    if (s.session)
      live_refresh(&s);
  }
  launch_forward_signals(0);
  drain_all(&s, rings, nrings);
  for (size_t i = 0; i < nrings; ++i) {
    munmap(rings[i].meta, rings[i].map_size);
    close(rings[i].fd);
  }
  free(rings);
  free(pfd);

  double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  char unwinder[96];
  if (o->fp)
    snprintf(unwinder, sizeof unwinder, "kernel cpu-clock events, frame-pointer call chains");
  else
    snprintf(unwinder, sizeof unwinder, "kernel cpu-clock events, DWARF unwinding of %u KiB stack copies",
             o->stack_size / 1024);
  xs_method_stats_t ms = {s.lost, s.throttled, s.cut, cpu, -1, unwinder};
  if (s.session && nrings && xs_session_finish(s.session, &ms) == 0) {
    /* Never "no samples" without a reason. */
    double user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
    /* Nothing lost or throttled and a few periods at most: the start-up
     * before the events were enabled is counted but not sampled (true
     * used 11-20 ms here on a slow guest). */
    double period = 1.0 / effective_hz(o);
    if (user < period || (!s.lost && !s.throttled && user < 4 * period))
      fprintf(stderr, "xptrace sample: no samples: the program used %.3f s of user-space CPU time, %s "
              "(kernel time is not sampled; raise -f)\n", user,
              user < period ? "less than one sampling period" : "a few sampling periods at most");
    else
      fprintf(stderr, "xptrace sample: no samples: %llu lost, %llu throttled by the kernel "
              "(kernel.perf_event_max_sample_rate; lower -f)\n", (unsigned long long)s.lost,
              (unsigned long long)s.throttled);
  }
  xs_session_free(s.session);
  unw_free(s.unw);
  free(s.pcs);
  free(s.live);
  launch_forward_said(command[0]);
  if (after)
    after(ctx);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    fprintf(stderr, "xptrace: %s killed by signal %d (%s)\n", command[0], sig, signal_name(sig));
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
