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
#include "sampler_config.h"
#include "sample_kernel.h"
#include "sample_perf_ring.h"
#include "sample_perf_unwind.h"
#include "samples.h"
#include "sample_perf_internal.h"
#include "sample_perf_offcpu.h"


/* ---- threads' CPU times ------------------------------------------------------ */

/* Each thread's CPU time, for the diagnostics, read from /proc by the
 * launcher while the thread runs: a few threads per round, in turn, so
 * the last value may be up to a few rounds old. Not inherit_stat's READ
 * record at thread exit: with inherit_stat on any event of the program
 * (the sampling one or a counter beside it), Linux 6.18 here stopped
 * sampling a thread for the rest of its run in 19 of 42 runs of 4 kHz
 * sampling next to 500 short sibling threads; none of 50 without it. */
enum { LIVE_PER_ROUND = 32 };

void live_add(perf_state_t *s, pid_t pid, pid_t tid) {
  if (s->nlive == s->cap_live) {
    size_t cap = s->cap_live ? 2 * s->cap_live : 64;
    struct live *l = realloc(s->live, cap * sizeof *l);
    if (!l)
      return; /* that thread's CPU time stays unknown */
    s->live = l;
    s->cap_live = cap;
  }
  s->live[s->nlive++] = (struct live){pid, tid, 0};
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

/* Its share of kernel time, from utime and stime (in ticks), or -1. */
static double system_share(pid_t pid, pid_t tid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
  FILE *f = fopen(path, "re");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f)
    fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  unsigned long long ut, st;
  if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2 ||
      ut + st == 0)
    return -1;
  return (double)st / (double)(ut + st);
}

void live_refresh(perf_state_t *s) {
  for (size_t k = 0; k < LIVE_PER_ROUND && s->nlive; ++k) {
    size_t i = s->next_live++ % s->nlive;
    uint64_t ns = counters_thread_cpu_ns(s->live[i].pid, s->live[i].tid);
    double sys = system_share(s->live[i].pid, s->live[i].tid);
    if (ns == UINT64_MAX) {
      live_remove(s, i); /* gone before its EXIT record was read */
    } else {
      /* base: what a thread had run before we attached */
      xs_thread_cpu(s->session, s->live[i].pid, s->live[i].tid, ns > s->live[i].base ? ns - s->live[i].base : 0);
      if (sys >= 0)
        xs_thread_system(s->session, s->live[i].pid, s->live[i].tid, sys);
    }
  }
}

/* ---- records ------------------------------------------------------------ */

bool perf_take(const unsigned char **p, const unsigned char *end, void *out, size_t n) {
  if ((size_t)(end - *p) < n)
    return false;
  memcpy(out, *p, n);
  *p += n;
  return true;
}

bool perf_take_user(const unsigned char **p, const unsigned char *end, perf_user_t *u) {
  uint64_t size = 0;
  u->stack = NULL;
  u->dyn = 0;
  if (!perf_take(p, end, &u->abi, 8))
    return false;
  if (u->abi != PERF_SAMPLE_REGS_ABI_NONE && !perf_take(p, end, u->regs, sizeof u->regs))
    return false;
  if (perf_take(p, end, &size, 8) && size && size <= (uint64_t)(end - *p)) {
    u->stack = *p;
    *p += size;
    /* The part the kernel really copied; all of it when it says more. */
    if (!perf_take(p, end, &u->dyn, 8) || u->dyn > size)
      u->dyn = size;
  }
  return true;
}

/* Whether `ns` after the exec is inside a window of wall-time specs
 * (each: `cycles` times `delay` without, `duration` with; 0 cycles:
 * forever; after the last, none). */
static bool in_window_ns(const sampler_period_t *p, size_t n, uint64_t ns) {
  double t = (double)ns * 1e-9;
  for (size_t i = 0; i < n; ++i) {
    double cycle = p[i].delay + p[i].duration;
    if (p[i].cycles == 0 || t < cycle * (double)p[i].cycles) {
      double in = t - cycle * (double)(uint64_t)(t / cycle);
      return in >= p[i].delay;
    }
    t -= cycle * (double)p[i].cycles;
  }
  return false;
}

int perf_window_clock(const sample_perf_opts_t *o) {
  for (size_t i = 1; i < o->nperiods; ++i)
    if (o->periods[i].clock != o->periods[0].clock)
      return PERF_WINDOWS_MIXED;
  return o->nperiods ? (int)o->periods[0].clock : SAMPLER_PERIOD_REALTIME;
}

bool perf_in_window(perf_state_t *s, pid_t pid, pid_t tid, uint64_t t, bool count) {
  if (!s->o->nperiods)
    return true;
  int clock = perf_window_clock(s->o);
  if (clock == SAMPLER_PERIOD_REALTIME)
    return in_window_ns(s->o->periods, s->o->nperiods, t < s->t_exec ? 0 : t - s->t_exec);
  /* CPU time: each process counted from its own start, as the timer
   * method does (a forked child starts the windows again). */
  size_t i = 0;
  while (i < s->ncpu && s->cpu[i].pid != pid)
    ++i;
  if (i == s->ncpu) {
    if (!count)
      return false;
    if (s->ncpu == s->capcpu) {
      size_t cap = s->capcpu ? 2 * s->capcpu : 16;
      struct cpuclock *c = realloc(s->cpu, cap * sizeof *c);
      if (!c)
        return false;
      s->cpu = c;
      s->capcpu = cap;
    }
    s->cpu[s->ncpu++] = (struct cpuclock){pid, 0, 0};
  }
  if (count) {
    s->cpu[i].proc++;
    s->cpu[i].main += tid == pid;
  }
  uint64_t periods = clock == SAMPLER_PERIOD_CPUTIME ? s->cpu[i].main : s->cpu[i].proc;
  return in_window_ns(s->o->periods, s->o->nperiods, (uint64_t)((double)periods * 1e9 / effective_hz(s->o)));
}

static void on_sample(perf_state_t *s, const unsigned char *p, const unsigned char *end) {
  perf_head_t h;
  if (!perf_take(&p, end, &h, sizeof h))
    return;
  if (s->per_cpu && (pid_t)h.pid == s->root && !s->root_execed)
    return; /* the command before its exec */
  if ((int32_t)h.tid <= 0)
    return; /* a task already unhashed as it exits (per-CPU events): no thread to name */
  if (!perf_in_window(s, (pid_t)h.pid, (pid_t)h.tid, h.time, true)) {
    s->outside++;
    return;
  }
  size_t max = s->o->depth;
  size_t n = 0;
  bool truncated = false;
  if (!s->o->fp && s->kernel) {
    /* The kernel's part of the stack (the user part is unwound below). */
    uint64_t nr;
    if (!perf_take(&p, end, &nr, 8) || nr > (uint64_t)(end - p) / 8)
      return;
    for (uint64_t i = 0; i < nr; ++i) {
      uint64_t pc;
      memcpy(&pc, p + 8 * i, 8);
      if (pc < (uint64_t)PERF_CONTEXT_MAX && n + 1 < max)
        s->pcs[n++] = pc;
    }
    p += 8 * nr;
    if (n)
      ksym_preload(); /* the names, read beside the program (the kernel writes them slowly) */
  }
  if (s->o->fp) {
    uint64_t nr;
    if (!perf_take(&p, end, &nr, 8) || nr > (uint64_t)(end - p) / 8)
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
    perf_user_t u;
    if (!perf_take_user(&p, end, &u))
      return;
    if (u.abi == PERF_SAMPLE_REGS_ABI_NONE) {
      if (n == 0)
        s->pcs[n++] = h.ip; /* no user registers: a kernel thread's sample */
    } else {
      unw_result_t r;
      n += unw_stack(s->unw, (pid_t)h.pid, (pid_t)h.tid, u.regs, u.stack, u.dyn, s->pcs + n, max - n, &r);
      truncated = r == UNW_TRUNCATED;
      s->cut += r == UNW_CUT;
    }
  }
  xs_sample(s->session, XS_CPUTIME, (pid_t)h.pid, (pid_t)h.tid, h.time, 1, s->pcs, n, truncated);
  if (s->off && s->o->realtime) /* a period of CPU time is as much wall time */
    xs_sample(s->session, XS_REALTIME, (pid_t)h.pid, (pid_t)h.tid, h.time, s->period_us, s->pcs, n, truncated);
}

static void on_record(perf_state_t *s, const struct perf_event_header *hdr) {
  const unsigned char *p = (const unsigned char *)(hdr + 1);
  const unsigned char *end = (const unsigned char *)hdr + hdr->size;
  uint64_t t = perf_record_time(hdr);
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
    if (exec && (pid_t)ids[0] == s->root && !s->root_execed) {
      s->root_execed = true;
      s->t_exec = t;
    }
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
      if (s->off)
        offcpu_exit(s, (pid_t)ids[2]);
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
  default:
    if (s->off)
      offcpu_record(s, hdr);
    break;
  }
}

/* What the reader copied out of the rings, in time order. */
void handle_batch(perf_state_t *s, reader_t *rd) {
  batch_t b;
  reader_take(rd, &b);
  for (size_t i = 0; i < b.n; ++i) {
    on_record(s, b.rec[i]);
    free(b.rec[i]);
  }
  free(b.rec);
}

/* ---- opening the events ----------------------------------------------------- */

long read_sysctl(const char *name, long fallback) {
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
double effective_hz(const sample_perf_opts_t *o) {
  double max_rate = (double)read_sysctl("perf_event_max_sample_rate", 100000);
  return o->hz < max_rate ? o->hz : max_rate;
}

/* kernel: kernel time and frames too (root, or perf_event_paranoid <= 1).
 * per_cpu: one event per CPU for every task (root, CAP_PERFMON or
 * paranoid <= 0), the tree picked by pid: the period runs on across
 * threads, so threads shorter than a period get their share, where an
 * inherited event loses the period in progress whenever a thread ends. */
static void make_attr(const sample_perf_opts_t *o, struct perf_event_attr *a, bool build_id, bool kernel,
                      bool per_cpu) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->type = PERF_TYPE_SOFTWARE;
  a->config = PERF_COUNT_SW_CPU_CLOCK;
  /* A fixed period of CPU time (ns): every sample weighs the same.  It is
   * 1/128 longer than asked, so that it never runs in step with the
   * scheduler's tick: per-CPU clocks in step with it gave a thread beside
   * a spinning one 40-62 % of the samples for 50 % of the CPU under load
   * (10 runs at 992 Hz: 48.5-51.6 %).  perf's users pick 99 Hz for this. */
  double period = 1e9 / effective_hz(o);
  period += period / 128;
  a->sample_period = period < 1000 ? 1000 : (uint64_t)period;
  a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  long max_stack = read_sysctl("perf_event_max_stack", 127);
  if (o->fp) {
    a->sample_type |= PERF_SAMPLE_CALLCHAIN;
    a->sample_max_stack = (uint16_t)((long)o->depth + 1 < max_stack ? (long)o->depth + 1 : max_stack);
  } else {
    a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    a->sample_regs_user = UNW_REGS_MASK;
    a->sample_stack_user = o->stack_size;
    if (kernel) { /* the kernel's frames from its call chain, the user's unwound */
      a->sample_type |= PERF_SAMPLE_CALLCHAIN;
      a->exclude_callchain_user = 1;
      a->sample_max_stack = (uint16_t)(max_stack < 64 ? max_stack : 64);
    }
  }
  a->disabled = !per_cpu;
  a->inherit = !per_cpu;
  a->enable_on_exec = !per_cpu;
  a->exclude_idle = per_cpu;
  a->exclude_kernel = !kernel; /* perf_event_paranoid 2 allows user space only */
  a->exclude_hv = 1;
  a->exclude_callchain_kernel = !kernel;
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
  a->wakeup_watermark = o->fp ? 64 * 1024 : 512 * 1024; /* wake early: rings of 0.5-16 MiB */
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
  make_attr(o, &a, false, false, false);
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

/* What the kernel permits beyond user space of our children: kernel
 * time, per-CPU events.  To compare: XPTRACE_SAMPLE_SCOPE=thread takes
 * inherited events, XPTRACE_SAMPLE_KERNEL=0 user space only, even where
 * more is allowed. */
void probe_scope(const sample_perf_opts_t *o, bool *kernel, bool *per_cpu) {
  struct perf_event_attr a;
  make_attr(o, &a, false, true, false);
  const char *no_kernel = getenv("XPTRACE_SAMPLE_KERNEL");
  int fd = no_kernel && strcmp(no_kernel, "0") == 0 ? -1 : perf_open(&a, 0, -1);
  *kernel = fd >= 0;
  if (fd >= 0)
    close(fd);
  const char *scope = getenv("XPTRACE_SAMPLE_SCOPE");
  *per_cpu = false;
  if (scope && strcmp(scope, "thread") == 0)
    return;
  make_attr(o, &a, false, *kernel, true);
  a.disabled = 1;
  fd = perf_open(&a, -1, 0);
  *per_cpu = fd >= 0;
  if (fd >= 0)
    close(fd);
}

/* One event per CPU: inherit with a ring buffer needs per-CPU events;
 * per_cpu: for every task on that CPU. */
size_t open_rings(const sample_perf_opts_t *o, pid_t pid, bool kernel, bool per_cpu, ring_t **out,
                         int *err) {
  struct perf_event_attr a;
  make_attr(o, &a, true, kernel, per_cpu);
  if (per_cpu)
    pid = -1;
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  /* Room for a few hundred samples with their stack copies per CPU. */
  size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = o->fp ? 128 : 1024;
  /* Per-CPU events carry every process's samples until the launcher
   * leaves them out: 4x the room (16 MiB a CPU, a second at 1 kHz; less
   * on many CPUs), where the memory allowance permits. */
  if (per_cpu)
    pages *= ncpu <= 16 ? 4 : ncpu <= 64 ? 2 : 1;
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
    rings[n++] = (ring_t){fd, m, (unsigned char *)m + page, pages * page, (pages + 1) * page, false};
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
  if (launch_on_fork) /* xptrace run --counters */
    launch_on_fork(pid, launch_on_fork_ctx);

  const char *base = strrchr(command[0], '/');
  xs_options_t so = {o->dir,     command[0],    "perf", effective_hz(o), o->depth, o->demangle, true,
                     false,      o->trace_path, o->trace_path_len, {effective_hz(o), 0}, o->realtime};
  perf_state_t s = {.session = xs_session_new(&so), .unw = o->fp ? NULL : unw_new(), .o = o, .root = pid};
  probe_scope(o, &s.kernel, &s.per_cpu);
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
  size_t nrings = s.pcs && s.session ? open_rings(o, pid, s.kernel, s.per_cpu, &rings, &err) : 0;
  if (nrings == 0)
    fprintf(stderr, "xptrace sample: cannot sample %s: perf_event_open: %s\n", command[0],
            strerror(err ? err : ENODEV));
  size_t ncpu_rings = nrings;
  if (nrings && (o->off_cpu || o->realtime)) {
    /* The switch-out sample is taken in the kernel: it needs kernel
     * sampling, and its stack DWARF unwinding. */
    if (s.kernel && !o->fp && (s.off = offcpu_new(o->depth)) != NULL)
      nrings = offcpu_open_rings(o, pid, &rings, nrings);
    if (nrings == ncpu_rings) {
      offcpu_unavailable(o, &s.off);
    }
    s.period_us = (uint64_t)(1e6 / effective_hz(o) + 0.5);
  }
  reader_t rd;
  reader_init(&rd, rings, nrings, s.per_cpu, pid);
  bool threaded = reader_start(&rd);
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
    if (threaded) {
      usleep(50000);
    } else {
      struct pollfd pfd = {.fd = nrings ? rings[0].fd : -1, .events = POLLIN};
      poll(&pfd, 1, 50);
      reader_poll(&rd);
    }
    handle_batch(&s, &rd);
    if (s.session)
      live_refresh(&s);
  }
  launch_forward_signals(0);
  reader_stop(&rd);
  handle_batch(&s, &rd);
  reader_free(&rd);
  for (size_t i = 0; i < nrings; ++i) {
    munmap(rings[i].meta, rings[i].map_size);
    close(rings[i].fd);
  }
  free(rings);

  double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
               (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  char unwinder[256], how[96];
  snprintf(how, sizeof how, "; %s, %s", s.per_cpu ? "per-CPU events" : "per-thread events",
           s.kernel ? "user and kernel time" : "user time only");
  if (o->fp)
    snprintf(unwinder, sizeof unwinder, "kernel cpu-clock events, frame-pointer call chains%s", how);
  else
    snprintf(unwinder, sizeof unwinder, "kernel cpu-clock events, DWARF unwinding of %u KiB stack copies%s",
             o->stack_size / 1024, how);
  if (s.off) {
    size_t len = strlen(unwinder);
    snprintf(unwinder + len, sizeof unwinder - len, "; context switches of the command's threads");
  }
  xs_method_stats_t ms = {s.lost, s.throttled, s.cut, cpu, -1, unwinder, s.kernel, s.per_cpu};
  double user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
  uint64_t written = s.session && nrings ? xs_session_finish(s.session, &ms) : 1;
  double due = (s.kernel ? cpu : user) * effective_hz(o);
  /* Per-thread events: what the kernel did not sample, with the cause. */
  if (written && !o->nperiods && !s.per_cpu && due >= 20 && (double)written < 0.8 * due && !s.lost && !s.throttled)
    fprintf(stderr, "xptrace sample: %llu samples for %.3f CPU-s of %s time at %g Hz (%.0f due): per-thread "
            "events lose the period in progress whenever a thread ends, so threads shorter than a period "
            "go unsampled; per-CPU sampling (root, CAP_PERFMON or kernel.perf_event_paranoid <= 0) has "
            "no such loss, or raise -f\n", (unsigned long long)written, s.kernel ? cpu : user,
            s.kernel ? "user and kernel" : "user", effective_hz(o), due);
  if (written == 0 && o->nperiods) {
    fprintf(stderr, "xptrace sample: no samples: no sampling window opened before the program ended "
            "(--periods; %llu samples outside)\n", (unsigned long long)s.outside);
  } else if (written == 0) {
    /* Never "no samples" without a reason. */
    /* Nothing lost or throttled and a few periods at most: the start-up
     * before the events were enabled is counted but not sampled (true
     * used 11-20 ms here on a slow guest). */
    double period = 1.0 / effective_hz(o);
    if (user < period || (!s.lost && !s.throttled && user < 4 * period))
      fprintf(stderr, "xptrace sample: no samples: the program used %.3f s of user-space CPU time, %s "
              "(%s; raise -f)\n", user,
              user < period ? "less than one sampling period" : "a few sampling periods at most",
              s.kernel ? "its kernel time too" : "kernel time is not sampled");
    else
      fprintf(stderr, "xptrace sample: no samples: %llu lost, %llu throttled by the kernel "
              "(kernel.perf_event_max_sample_rate; lower -f)\n", (unsigned long long)s.lost,
              (unsigned long long)s.throttled);
  }
  xs_session_free(s.session);
  offcpu_free(s.off);
  unw_free(s.unw);
  free(s.pcs);
  free(s.live);
  free(s.cpu);
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
