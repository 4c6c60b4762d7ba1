/* Counters of a launched program (counters.h).  A thread of xptrace
 * polls /proc every 10 ms (per thread: CPU time, context switches, page
 * faults, cumulative since the thread started, so a thread found late
 * loses nothing; per process: RSS and peak RSS); perf_event counters
 * opened on the program before its exec, inherited by its threads and
 * children, give the process totals at the end.  Only changes are kept;
 * the trace is written once the program has ended. */
#include <dirent.h>
#include <stdio.h>
#include <fcntl.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "counters.h"
#include "xptrace_cmds.h"
#include "pt_internal.h"
#include "xpt_files.h"

#define POLL_NS 10000000L

enum src { SRC_THREAD, SRC_PROCESS, SRC_SOFT, SRC_HARD };
enum unit { UNIT_NS = 1, UNIT_COUNT = 2, UNIT_BYTES = 3 }; /* CounterDescriptor.Unit */
enum { T_CPU, T_CSW, T_FAULTS, P_RSS, P_HWM };

static const struct cdef {
  const char *name;
  enum src src;
  uint64_t config; /* perf: the event; /proc: T_* / P_* */
  enum unit unit;
  bool dflt;
  const char *desc;
} defs[] = {
    {"thread-cpu-time", SRC_THREAD, T_CPU, UNIT_NS, true, "CPU time of each thread (schedstat)"},
    {"thread-context-switches", SRC_THREAD, T_CSW, UNIT_COUNT, true,
     "voluntary + involuntary switches of each thread"},
    {"thread-page-faults", SRC_THREAD, T_FAULTS, UNIT_COUNT, true,
     "minor + major page faults of each thread"},
    {"rss", SRC_PROCESS, P_RSS, UNIT_BYTES, true, "resident set size of the process"},
    {"peak-rss", SRC_PROCESS, P_HWM, UNIT_BYTES, true, "peak resident set size"},
    {"task-clock", SRC_SOFT, PERF_COUNT_SW_TASK_CLOCK, UNIT_NS, true,
     "CPU time, process total (perf_event)"},
    {"context-switches", SRC_SOFT, PERF_COUNT_SW_CONTEXT_SWITCHES, UNIT_COUNT, true,
     "context switches, process total (perf_event)"},
    {"cpu-migrations", SRC_SOFT, PERF_COUNT_SW_CPU_MIGRATIONS, UNIT_COUNT, false,
     "CPU migrations, process total (perf_event)"},
    {"page-faults", SRC_SOFT, PERF_COUNT_SW_PAGE_FAULTS, UNIT_COUNT, true,
     "page faults, process total (perf_event)"},
    {"minor-faults", SRC_SOFT, PERF_COUNT_SW_PAGE_FAULTS_MIN, UNIT_COUNT, false,
     "minor page faults, process total (perf_event)"},
    {"major-faults", SRC_SOFT, PERF_COUNT_SW_PAGE_FAULTS_MAJ, UNIT_COUNT, false,
     "major page faults, process total (perf_event)"},
    {"cycles", SRC_HARD, PERF_COUNT_HW_CPU_CYCLES, UNIT_COUNT, false, "CPU cycles (PMU)"},
    {"instructions", SRC_HARD, PERF_COUNT_HW_INSTRUCTIONS, UNIT_COUNT, false,
     "instructions retired (PMU)"},
    {"cache-references", SRC_HARD, PERF_COUNT_HW_CACHE_REFERENCES, UNIT_COUNT, false,
     "last-level cache references (PMU)"},
    {"cache-misses", SRC_HARD, PERF_COUNT_HW_CACHE_MISSES, UNIT_COUNT, false,
     "last-level cache misses (PMU)"},
    {"branches", SRC_HARD, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, UNIT_COUNT, false,
     "branch instructions (PMU)"},
    {"branch-misses", SRC_HARD, PERF_COUNT_HW_BRANCH_MISSES, UNIT_COUNT, false,
     "mispredicted branches (PMU)"},
};
#define NDEFS (sizeof(defs) / sizeof(defs[0]))

struct value { /* a counter's value that changed */
  uint64_t ts;
  int64_t v;
  int32_t tid; /* 0: the process */
  uint16_t def;
};

struct thread {
  int32_t tid;
  char name[20];
  int64_t last[3]; /* T_*: last value kept, -1 none */
};

struct xpt_counters {
  bool want[NDEFS];
  int fd[NDEFS]; /* perf_event, -1 none */
  pid_t pid;
  pthread_t poller;
  bool polling;
  atomic_bool stop;
  uint64_t start_ns;
  char program[20];
  struct value *v;
  size_t nv, capv;
  struct thread *th;
  size_t nth, capth;
  int64_t proc_last[2];
  bool oom;
};

static uint64_t now_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct xpt_counters *counters_parse(const char *list, char *why, size_t len) {
  struct xpt_counters *c = calloc(1, sizeof(*c));
  if (!c) {
    snprintf(why, len, "out of memory");
    return NULL;
  }
  for (size_t i = 0; i < NDEFS; i++)
    c->fd[i] = -1;
  char copy[1024];
  snprintf(copy, sizeof copy, "%s", list);
  size_t n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(copy, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
    bool all = !strcmp(tok, "all"), dflt = !strcmp(tok, "default"), found = all || dflt;
    for (size_t i = 0; i < NDEFS; i++)
      if (all || (dflt && defs[i].dflt) || !strcmp(tok, defs[i].name)) {
        c->want[i] = true;
        found = true;
        n++;
      }
    if (!found) {
      snprintf(why, len, "unknown counter '%s' ('xptrace avail' lists them)", tok);
      free(c);
      return NULL;
    }
  }
  if (n == 0) {
    snprintf(why, len, "counter list '%s' names no counter", list);
    free(c);
    return NULL;
  }
  c->proc_last[0] = c->proc_last[1] = -1;
  return c;
}

static int perf_open(const struct cdef *d, pid_t pid, bool on_exec) {
  struct perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = d->src == SRC_HARD ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE;
  a.config = d->config;
  a.disabled = on_exec;
  a.enable_on_exec = on_exec;
  a.inherit = 1;
  long fd = syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0 && errno == EACCES) { /* perf_event_paranoid: user space only */
    a.exclude_kernel = a.exclude_hv = 1;
    fd = syscall(SYS_perf_event_open, &a, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  }
  return (int)fd;
}

/* Why a hardware counter failed, in words. */
static const char *hard_reason(int err) {
  return err == ENOENT || err == EOPNOTSUPP || err == ENODEV
             ? "this machine has no hardware PMU (a VM without PMU passthrough?)"
             : "perf_event_open refused it";
}

static bool add_value(struct xpt_counters *c, uint64_t ts, int32_t tid, uint16_t def, int64_t v) {
  if (c->nv == c->capv) {
    size_t nc = c->capv ? c->capv * 2 : 1024;
    struct value *nvp = realloc(c->v, nc * sizeof(*nvp));
    if (!nvp) {
      c->oom = true;
      return false;
    }
    c->v = nvp;
    c->capv = nc;
  }
  c->v[c->nv++] = (struct value){ts, v, tid, def};
  return true;
}

static void read_comm(struct thread *t, const char *dir) {
  char path[128];
  snprintf(path, sizeof path, "%s/comm", dir);
  FILE *f = fopen(path, "re");
  if (f) {
    if (fgets(t->name, sizeof t->name, f))
      t->name[strcspn(t->name, "\n")] = 0;
    fclose(f);
  }
}

static struct thread *thread_of(struct xpt_counters *c, int32_t tid, const char *dir) {
  for (size_t i = 0; i < c->nth; i++) /* threads stay few: xptrace lists them */
    if (c->th[i].tid == tid) {
      if (tid == c->pid) /* first seen before its exec, maybe */
        read_comm(&c->th[i], dir);
      return &c->th[i];
    }
  if (c->nth == c->capth) {
    size_t nc = c->capth ? c->capth * 2 : 64;
    struct thread *nt = realloc(c->th, nc * sizeof(*nt));
    if (!nt) {
      c->oom = true;
      return NULL;
    }
    c->th = nt;
    c->capth = nc;
  }
  struct thread *t = &c->th[c->nth++];
  memset(t, 0, sizeof(*t));
  t->tid = tid;
  t->last[0] = t->last[1] = t->last[2] = -1;
  read_comm(t, dir);
  return t;
}

/* A "Key:  value" line of a status file. */
static bool status_field(const char *line, const char *key, int64_t *v) {
  size_t k = strlen(key);
  if (strncmp(line, key, k) != 0 || line[k] != ':')
    return false;
  *v = strtoll(line + k + 1, NULL, 10);
  return true;
}

/* The kernel's run time of a thread in ns (schedstat), else its user and
 * system ticks (stat); UINT64_MAX when it is gone. */
uint64_t counters_thread_cpu_ns(pid_t pid, pid_t tid) {
  char path[64], buf[1024];
  unsigned long long ns;
  snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  if (fd >= 0)
    close(fd);
  if (n > 0) {
    buf[n] = '\0';
    if (sscanf(buf, "%llu", &ns) == 1)
      return ns;
  }
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  if (fd >= 0)
    close(fd);
  if (n <= 0)
    return UINT64_MAX;
  buf[n] = '\0';
  /* After "(comm)": state is field 3, utime and stime fields 14 and 15. */
  const char *p = strrchr(buf, ')');
  unsigned long long ut, st;
  if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return UINT64_MAX;
  long hz = sysconf(_SC_CLK_TCK);
  return hz > 0 ? (ut + st) * (1000000000ull / (unsigned long long)hz) : UINT64_MAX;
}

static void poll_thread(struct xpt_counters *c, int32_t tid, uint64_t ts) {
  char dir[96], path[128], buf[1024];
  snprintf(dir, sizeof dir, "/proc/%d/task/%d", (int)c->pid, (int)tid);
  struct thread *t = thread_of(c, tid, dir);
  if (!t)
    return;
  int64_t val[3] = {-1, -1, -1};
  uint64_t ns = counters_thread_cpu_ns(c->pid, tid);
  if (ns != UINT64_MAX && ns <= INT64_MAX)
    val[T_CPU] = (int64_t)ns;
  snprintf(path, sizeof path, "%s/status", dir);
  FILE *f = fopen(path, "re");
  if (f) {
    int64_t vol = -1, invol = -1, x;
    while (fgets(buf, sizeof buf, f)) {
      if (status_field(buf, "voluntary_ctxt_switches", &x))
        vol = x;
      else if (status_field(buf, "nonvoluntary_ctxt_switches", &x))
        invol = x;
    }
    if (vol >= 0 && invol >= 0)
      val[T_CSW] = vol + invol;
    fclose(f);
  }
  snprintf(path, sizeof path, "%s/stat", dir);
  if ((f = fopen(path, "re"))) {
    /* fields after the command's ")": state ppid pgrp session tty tpgid
     * flags minflt cminflt majflt */
    if (fgets(buf, sizeof buf, f)) {
      const char *p = strrchr(buf, ')');
      unsigned long long minflt, majflt;
      if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %llu %*u %llu", &minflt, &majflt) == 2)
        val[T_FAULTS] = (int64_t)(minflt + majflt);
    }
    fclose(f);
  }
  for (int k = 0; k < 3; k++) {
    size_t def = (size_t)k; /* defs 0..2 are the thread ones, in T_* order */
    if (!c->want[def] || val[k] < 0 || val[k] == t->last[k])
      continue;
    if (add_value(c, ts, tid, (uint16_t)def, val[k]))
      t->last[k] = val[k];
  }
}

static void poll_process(struct xpt_counters *c, uint64_t ts) {
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)c->pid);
  FILE *f = fopen(path, "re");
  if (!f)
    return;
  int64_t kb[2] = {-1, -1}, x;
  while (fgets(buf, sizeof buf, f)) {
    if (status_field(buf, "VmRSS", &x))
      kb[0] = x;
    else if (status_field(buf, "VmHWM", &x))
      kb[1] = x;
  }
  fclose(f);
  /* The kernel's RSS is summed lazily from per-thread caches: VmHWM may
   * read a little lower than before; the peak is the highest seen. */
  if (kb[1] >= 0 && kb[1] * 1024 < c->proc_last[1])
    kb[1] = c->proc_last[1] / 1024;
  for (int k = 0; k < 2; k++) {
    size_t def = (size_t)(P_RSS + k);
    if (c->want[def] && kb[k] >= 0 && kb[k] * 1024 != c->proc_last[k] &&
        add_value(c, ts, 0, (uint16_t)def, kb[k] * 1024))
      c->proc_last[k] = kb[k] * 1024;
  }
}

static void poll_once(struct xpt_counters *c) {
  uint64_t ts = now_ns(CLOCK_MONOTONIC);
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)c->pid);
  DIR *d = opendir(dir);
  if (!d)
    return;
  bool threads = c->want[0] || c->want[1] || c->want[2];
  struct dirent *e;
  while (threads && (e = readdir(d)))
    if (e->d_name[0] != '.')
      poll_thread(c, (int32_t)atoi(e->d_name), ts);
  closedir(d);
  if (c->want[P_RSS] || c->want[P_HWM])
    poll_process(c, ts);
}

static void *poller(void *arg) {
  struct xpt_counters *c = arg;
  while (!atomic_load(&c->stop)) {
    poll_once(c);
    struct timespec nap = {0, POLL_NS};
    nanosleep(&nap, NULL);
  }
  return NULL;
}

void counters_start(struct xpt_counters *c, pid_t pid) {
  c->pid = pid;
  c->start_ns = now_ns(CLOCK_MONOTONIC);
  char hard[256] = "";
  int hard_err = 0;
  for (size_t i = 0; i < NDEFS; i++) {
    if (!c->want[i] || (defs[i].src != SRC_SOFT && defs[i].src != SRC_HARD))
      continue;
    c->fd[i] = perf_open(&defs[i], pid, true);
    if (c->fd[i] >= 0)
      continue;
    if (defs[i].src == SRC_HARD) { /* one line for all of them, below */
      size_t n = strlen(hard);
      snprintf(hard + n, sizeof hard - n, "%s%s", n ? ", " : "", defs[i].name);
      hard_err = errno;
    } else {
      fprintf(stderr, "xptrace: counter %s unavailable: perf_event_open: %s\n", defs[i].name,
              strerror(errno));
    }
  }
  if (hard[0])
    fprintf(stderr, "xptrace: hardware counters unavailable (%s): %s (perf_event_open: %s)\n",
            hard, hard_reason(hard_err), strerror(hard_err));
  atomic_init(&c->stop, false);
  c->polling = pthread_create(&c->poller, NULL, poller, c) == 0;
  if (!c->polling)
    fprintf(stderr, "xptrace: counters: cannot start the polling thread\n");
}

/* ---- the trace ---- */
enum {
  TRACE_PACKET = 1, TP_TIMESTAMP = 8, TP_TS_CLOCK = 58, TP_SEQ = 10, TP_SEQ_FLAGS = 13,
  TP_CLOCK_SNAPSHOT = 6, TP_TRACK_EVENT = 11, TP_TRACK_DESCRIPTOR = 60,
  CS_CLOCKS = 1, CS_PRIMARY = 2, CLK_ID = 1, CLK_TS = 2,
  TD_UUID = 1, TD_NAME = 2, TD_PROCESS = 3, TD_THREAD = 4, TD_PARENT = 5, TD_COUNTER = 8,
  PD_PID = 1, PD_NAME = 6, THD_PID = 1, THD_TID = 2, THD_NAME = 5, CD_UNIT = 3,
  TE_TYPE = 9, TE_TRACK = 11, TE_COUNTER_VALUE = 30, TE_TYPE_COUNTER = 4,
  CLOCK_MONO = 3, CLOCK_BOOT = 6,
};

/* Counter track uuids: below the process's graph track and device lanes,
 * above every tid (< 2^22): pid << 32 | 0x40000000 | def << 22 | tid. */
static uint64_t counter_uuid(pid_t pid, size_t def, int32_t tid) {
  return (uint64_t)(uint32_t)pid << 32 | 0x40000000u | (uint64_t)def << 22 | (uint32_t)tid;
}

static void packet_head(struct pt_buf *b, uint32_t seq) { pb_uint(b, TP_SEQ, seq); }

static void track(struct pt_buf *b, uint32_t seq, uint64_t uuid, uint64_t parent, pid_t pid,
                  int32_t tid, const char *name, int unit) {
  size_t p = pb_open(b, TRACE_PACKET);
  packet_head(b, seq);
  size_t td = pb_open(b, TP_TRACK_DESCRIPTOR);
  pb_uint(b, TD_UUID, uuid);
  if (parent)
    pb_uint(b, TD_PARENT, parent);
  if (unit) {
    pb_string(b, TD_NAME, name);
    size_t cd = pb_open(b, TD_COUNTER);
    pb_uint(b, CD_UNIT, (uint64_t)unit);
    pb_close(b, cd);
  } else if (tid) {
    size_t th = pb_open(b, TD_THREAD);
    pb_uint(b, THD_PID, (uint64_t)pid);
    pb_uint(b, THD_TID, (uint64_t)tid);
    pb_string(b, THD_NAME, name);
    pb_close(b, th);
  } else {
    size_t pd = pb_open(b, TD_PROCESS);
    pb_uint(b, PD_PID, (uint64_t)pid);
    pb_string(b, PD_NAME, name);
    pb_close(b, pd);
  }
  pb_close(b, td);
  pb_close(b, p);
}

static void value(struct pt_buf *b, uint32_t seq, uint64_t uuid, uint64_t ts, int64_t v) {
  size_t p = pb_open(b, TRACE_PACKET);
  pb_uint(b, TP_TIMESTAMP, ts);
  pb_uint(b, TP_TS_CLOCK, CLOCK_MONO);
  packet_head(b, seq);
  size_t te = pb_open(b, TP_TRACK_EVENT);
  pb_uint(b, TE_TYPE, TE_TYPE_COUNTER);
  pb_uint(b, TE_TRACK, uuid);
  pb_sint(b, TE_COUNTER_VALUE, v);
  pb_close(b, te);
  pb_close(b, p);
}

static void encode(struct xpt_counters *c, struct pt_buf *b, uint64_t end_ns,
                   const int64_t *total) {
  pid_t pid = c->pid;
  uint32_t seq = 0x7f000000u | ((uint32_t)pid & 0xffffffu); /* ours in any merge: from the pid */
  size_t p = pb_open(b, TRACE_PACKET);
  uint64_t mono = now_ns(CLOCK_MONOTONIC), boot = now_ns(CLOCK_BOOTTIME);
  pb_uint(b, TP_TIMESTAMP, mono);
  pb_uint(b, TP_TS_CLOCK, CLOCK_MONO);
  packet_head(b, seq);
  pb_uint(b, TP_SEQ_FLAGS, 1); /* SEQ_INCREMENTAL_STATE_CLEARED */
  size_t cs = pb_open(b, TP_CLOCK_SNAPSHOT);
  size_t k = pb_open(b, CS_CLOCKS);
  pb_uint(b, CLK_ID, CLOCK_BOOT);
  pb_uint(b, CLK_TS, boot);
  pb_close(b, k);
  k = pb_open(b, CS_CLOCKS);
  pb_uint(b, CLK_ID, CLOCK_MONO);
  pb_uint(b, CLK_TS, mono);
  pb_close(b, k);
  pb_uint(b, CS_PRIMARY, CLOCK_MONO);
  pb_close(b, cs);
  pb_close(b, p);
  uint64_t proc = (uint64_t)(uint32_t)pid << 32;
  track(b, seq, proc, 0, pid, 0, c->program, 0);
  for (size_t i = 0; i < c->nth; i++)
    track(b, seq, proc | (uint32_t)c->th[i].tid, proc, pid, c->th[i].tid,
          c->th[i].name[0] ? c->th[i].name : c->program, 0);
  /* one track per (counter, thread) that has a value */
  bool *made = calloc(NDEFS * (c->nth + 1), 1);
  for (size_t i = 0; made && i < c->nv; i++) {
    const struct value *v = &c->v[i];
    size_t ti = 0;
    if (v->tid)
      while (ti < c->nth && c->th[ti].tid != v->tid)
        ti++;
    size_t slot = v->def * (c->nth + 1) + (v->tid ? ti + 1 : 0);
    if (made[slot])
      continue;
    made[slot] = true;
    track(b, seq, counter_uuid(pid, v->def, v->tid), v->tid ? proc | (uint32_t)v->tid : proc,
          pid, v->tid, defs[v->def].name, defs[v->def].unit);
  }
  free(made);
  for (size_t i = 0; i < c->nv; i++)
    value(b, seq, counter_uuid(pid, c->v[i].def, c->v[i].tid), c->v[i].ts, c->v[i].v);
  /* process totals (perf_event): 0 at the start, the total at the end */
  for (size_t i = 0; i < NDEFS; i++) {
    if (total[i] < 0)
      continue;
    track(b, seq, counter_uuid(pid, i, 0), proc, pid, 0, defs[i].name, defs[i].unit);
    value(b, seq, counter_uuid(pid, i, 0), c->start_ns, 0);
    value(b, seq, counter_uuid(pid, i, 0), end_ns, total[i]);
  }
}

/* The folder of session `token` under dir whose name ends in -<pid>. */
static char *process_dir(const char *dir, const char *token, pid_t pid) {
  char **leaves = NULL, suffix[24], *found = NULL;
  size_t n = xptrace_session_dirs(dir, token, &leaves);
  snprintf(suffix, sizeof suffix, "-%d", (int)pid);
  for (size_t i = 0; i < n; i++) {
    size_t l = strlen(leaves[i]), k = strlen(suffix);
    if (!found && l > k && strcmp(leaves[i] + l - k, suffix) == 0)
      found = leaves[i];
    else
      free(leaves[i]);
  }
  free(leaves);
  return found;
}

void counters_finish(struct xpt_counters *c, const char *dir, const char *token, char *written,
                     size_t written_len) {
  if (written_len)
    written[0] = '\0';
  if (!c)
    return;
  if (c->polling) {
    atomic_store(&c->stop, true);
    pthread_join(c->poller, NULL);
  }
  uint64_t end_ns = now_ns(CLOCK_MONOTONIC);
  int64_t total[NDEFS];
  for (size_t i = 0; i < NDEFS; i++) {
    total[i] = -1;
    uint64_t v;
    if (c->fd[i] >= 0 && read(c->fd[i], &v, sizeof v) == (ssize_t)sizeof v)
      total[i] = (int64_t)v;
    if (c->fd[i] >= 0)
      close(c->fd[i]);
  }
  /* the program's name: its main thread's */
  for (size_t i = 0; i < c->nth; i++)
    if (c->th[i].tid == c->pid)
      snprintf(c->program, sizeof c->program, "%s", c->th[i].name);
  struct pt_buf b = {0};
  encode(c, &b, end_ns, total);
  char path[4096];
  char *leaf = process_dir(dir, token, c->pid);
  const char *where = leaf ? leaf : dir;
  int fd = b.failed || c->oom ? -1 : xpt_create_file(where, "counters.perfetto-trace", path,
                                                     sizeof path);
  if (fd < 0) {
    fprintf(stderr, "xptrace: counters: cannot write %s/counters.perfetto-trace: %s\n", where,
            b.failed || c->oom ? "out of memory" : strerror(errno));
  } else {
    size_t off = 0;
    while (off < b.len) {
      ssize_t w = write(fd, b.data + off, b.len - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        fprintf(stderr, "xptrace: counters: cannot write %s: %s\n", path, strerror(errno));
        break;
      }
      off += (size_t)w;
    }
    if (off == b.len && written_len)
      snprintf(written, written_len, "%s", path);
    close(fd);
  }
  free(leaf);
  free(b.data);
  free(c->v);
  free(c->th);
  free(c);
}

void counters_avail(FILE *out) {
  fputs("Counters (xptrace run --counters LIST; 'default' = the starred ones, 'all'):\n", out);
  for (size_t i = 0; i < NDEFS; i++) {
    const struct cdef *d = &defs[i];
    const char *state = "[available]";
    char why[96];
    if (d->src == SRC_SOFT || d->src == SRC_HARD) {
      int fd = perf_open(d, 0, false);
      if (fd >= 0)
        close(fd);
      else {
        int err = errno;
        snprintf(why, sizeof why, "[not available: %s]",
                 d->src == SRC_HARD && (err == ENOENT || err == EOPNOTSUPP || err == ENODEV)
                     ? "no hardware PMU"
                     : strerror(err));
        state = why;
      }
    }
    fprintf(out, "  %-24s %c %-48s %s\n", d->name, d->dflt ? '*' : ' ', d->desc, state);
  }
}
