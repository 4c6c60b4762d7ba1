/* xptrace sample -p: the perf method on running processes (per-CPU
 * events; docs/sampler.md, "Attaching to a running process"). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "counters.h"
#include "sample_perf_internal.h"
#include "sample_perf_offcpu.h"


static volatile sig_atomic_t attach_stop;
static void on_stop(int sig) {
  (void)sig;
  attach_stop = 1;
}

/* A running process as the records would have told it: its name, threads
 * (their CPU time so far as a base) and executable mappings. */
static void attach_scan(perf_state_t *s, pid_t pid) {
  char path[64], line[PATH_MAX + 128], comm[64] = "";
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  FILE *f = fopen(path, "re");
  if (f && fgets(comm, sizeof comm, f))
    comm[strcspn(comm, "\n")] = '\0';
  if (f)
    fclose(f);
  xs_process(s->session, pid, 0, 0);
  xs_process_name(s->session, pid, 0, comm, false);
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  f = fopen(path, "re");
  while (f && fgets(line, sizeof line, f)) {
    unsigned long long start, end, off;
    char perms[8];
    int at = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off, &at) < 4 || !strchr(perms, 'x'))
      continue;
    char *name = line + at;
    name[strcspn(name, "\n")] = '\0';
    xs_mapping(s->session, pid, 0, start, end, off, name, NULL, 0);
    if (s->unw)
      unw_mapping(s->unw, pid, start, end, off, name);
  }
  if (f)
    fclose(f);
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    pid_t tid = (pid_t)atoi(e->d_name);
    if (tid <= 0)
      continue;
    /* Its name as a COMM record would give it (pthread_setname_np). */
    char tcomm[64] = "";
    snprintf(path, sizeof path, "/proc/%d/task/%d/comm", (int)pid, (int)tid);
    FILE *tf = fopen(path, "re");
    if (tf && fgets(tcomm, sizeof tcomm, tf))
      tcomm[strcspn(tcomm, "\n")] = '\0';
    if (tf)
      fclose(tf);
    xs_thread(s->session, pid, tid, 0, tcomm);
    live_add(s, pid, tid);
    if (s->nlive && s->live[s->nlive - 1].tid == tid) {
      uint64_t ns = counters_thread_cpu_ns(pid, tid);
      s->live[s->nlive - 1].base = ns == UINT64_MAX ? 0 : ns;
    }
  }
  if (d)
    closedir(d);
}

/* The process's CPU time (utime + stime of every thread, ended ones too),
 * -1 when it is gone; *ended when it is a zombie (its times are final:
 * its parent has not reaped it yet, and may never while we wait). */
static double process_cpu(pid_t pid, bool *ended) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "re");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f)
    fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  unsigned long long ut, st;
  char state;
  if (!p || sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &state, &ut, &st) != 3)
    return -1;
  *ended = state == 'Z' || state == 'X';
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int sample_perf_attach(const pid_t *pids, size_t n, double duration, const sample_perf_opts_t *o) {
  for (size_t i = 0; i < n; ++i)
    if (kill(pids[i], 0) != 0) {
      fprintf(stderr, "xptrace sample: cannot attach to %d: %s\n", (int)pids[i], strerror(errno));
      return 1;
    }
  perf_state_t s = {.unw = o->fp ? NULL : unw_new(), .o = o, .root = pids[0], .root_execed = true};
  probe_scope(o, &s.kernel, &s.per_cpu);
  if (!s.per_cpu) {
    /* Per-thread events would miss the threads started before them. */
    fprintf(stderr, "xptrace sample: cannot attach to %d: sampling a running process needs per-CPU events "
            "(root, CAP_PERFMON or kernel.perf_event_paranoid <= 0; it is %ld)\n", (int)pids[0],
            read_sysctl("perf_event_paranoid", -9));
    unw_free(s.unw);
    return 1;
  }
  char comm[64] = "", path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pids[0]);
  FILE *f = fopen(path, "re");
  if (f && fgets(comm, sizeof comm, f))
    comm[strcspn(comm, "\n")] = '\0';
  if (f)
    fclose(f);
  xs_options_t so = {o->dir, comm, "perf", effective_hz(o), o->depth, o->demangle, true, false,
                     o->trace_path, o->trace_path_len, {effective_hz(o), 0}, o->realtime};
  s.session = xs_session_new(&so);
  s.pcs = calloc(o->depth ? o->depth : 1, sizeof *s.pcs);
  ring_t *rings = NULL;
  int err = 0;
  size_t nrings = s.session && s.pcs && (o->fp || s.unw) ? open_rings(o, -1, s.kernel, true, &rings, &err) : 0;
  if (nrings == 0) {
    fprintf(stderr, "xptrace sample: cannot attach to %d: perf_event_open: %s\n", (int)pids[0],
            strerror(err ? err : ENOMEM));
    xs_session_free(s.session);
    unw_free(s.unw);
    free(s.pcs);
    free(rings);
    return 1;
  }
  size_t ncpu_rings = nrings, nthreads = 0, nseen = 0;
  int open_err = 0;
  if (o->off_cpu || o->realtime) {
    /* As for a command (sample_perf.c), on each running thread. */
    if (s.kernel && !o->fp && (s.off = offcpu_new(o->depth)) != NULL)
      nrings = offcpu_attach_rings(o, s.off, pids, n, &rings, nrings, &nthreads, &nseen, &open_err);
    bool partial = open_err && nthreads < nseen;
    if (nrings == ncpu_rings && !partial)
      offcpu_unavailable(o, &s.off);
    else if (nrings == ncpu_rings) { /* none followed: not the permission's fault */
      offcpu_free(s.off);
      s.off = NULL;
    }
    if (partial) /* e.g. EMFILE: one descriptor per thread and CPU */
      fprintf(stderr, "xptrace sample: %zu of %zu attached thread(s) followed off CPU; some context-switch "
              "events could not be opened (perf_event_open: %s)%s\n", nthreads, nseen, strerror(open_err),
              open_err == EMFILE || open_err == ENFILE ? ": raise the open-file limit (ulimit -n)" : "");
    s.period_us = (uint64_t)(1e6 / effective_hz(o) + 0.5);
  }
  reader_t rd;
  reader_init(&rd, rings, nrings, true, pids[0]);
  xs_root(s.session, pids[0]);
  /* Each process's first and latest CPU time (-p takes 64 at most). */
  double cpu0 = 0, cpu1 = 0, first[64] = {0}, last[64] = {0};
  for (size_t i = 0; i < n && i < 64; ++i) {
    reader_add(&rd, pids[i]);
    attach_scan(&s, pids[i]);
    bool ended = false;
    double x = process_cpu(pids[i], &ended);
    first[i] = last[i] = x > 0 ? x : 0;
  }
  bool threaded = reader_start(&rd);
  struct sigaction stop = {.sa_handler = on_stop}, old_int, old_term;
  sigemptyset(&stop.sa_mask);
  sigaction(SIGINT, &stop, &old_int);
  sigaction(SIGTERM, &stop, &old_term);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  fprintf(stderr, "xptrace sample: attached to %s (pid %d%s); Ctrl-C ends\n", comm, (int)pids[0],
          n > 1 ? " and others" : "");
  /* The CPU time is read every 10 ms: a process is gone (reaped) before
   * the next reading, and what it used since the last one is not counted
   * (at 50 ms, and with no reading at all for one that ended during the
   * attach, a 0.3 s process was said to have used 0.000 CPU-seconds). */
  for (unsigned round = 0;; ++round) {
    bool alive = false;
    for (size_t i = 0; i < n && i < 64; ++i) {
      bool ended = false;
      double x = process_cpu(pids[i], &ended);
      alive |= x >= 0 && !ended;
      if (x > last[i])
        last[i] = x; /* the last reading while it ran, or its final times */
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    double elapsed = (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) * 1e-9;
    if (!alive || attach_stop || (duration > 0 && elapsed >= duration))
      break;
    usleep(10000);
    if (round % (threaded ? 5 : 2) != 0)
      continue;
    if (!threaded)
      reader_poll(&rd);
    handle_batch(&s, &rd);
    live_refresh(&s);
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  for (size_t i = 0; i < n && i < 64; ++i)
    cpu0 += first[i], cpu1 += last[i];
  for (size_t k = 0; k < s.nlive; ++k) /* the last CPU times, for the diagnostics */
    live_refresh(&s);
  reader_stop(&rd);
  handle_batch(&s, &rd);
  reader_free(&rd);
  for (size_t i = 0; i < nrings; ++i) {
    munmap(rings[i].meta, rings[i].map_size);
    close(rings[i].fd);
  }
  free(rings);
  char unwinder[224];
  snprintf(unwinder, sizeof unwinder, "kernel cpu-clock events, %s; per-CPU events, %s",
           o->fp ? "frame-pointer call chains" : "DWARF unwinding of 16 KiB stack copies",
           s.kernel ? "user and kernel time" : "user time only");
  if (s.off) {
    size_t len = strlen(unwinder);
    snprintf(unwinder + len, sizeof unwinder - len, "; context switches of %zu attached thread%s", nthreads,
             nthreads == 1 ? "" : "s");
  }
  xs_method_stats_t ms = {s.lost, s.throttled, s.cut, cpu1 - cpu0 > 0 ? cpu1 - cpu0 : -1, -1, unwinder,
                          s.kernel, true};
  if (xs_session_finish(s.session, &ms) == 0)
    fprintf(stderr, "xptrace sample: no samples: the processes used %.3f CPU-s while attached\n",
            cpu1 - cpu0 > 0 ? cpu1 - cpu0 : 0.0);
  xs_session_free(s.session);
  offcpu_free(s.off);
  unw_free(s.unw);
  free(s.pcs);
  free(s.live);
  free(s.cpu);
  return 0;
}
