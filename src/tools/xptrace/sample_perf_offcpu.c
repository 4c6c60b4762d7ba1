/* Off-CPU time under the perf method (sample_perf_offcpu.h): a
 * context-switches software event at period 1 on the command's tree
 * (inherited, one per CPU) samples each switch-out with the thread's user
 * registers and stack as they were at its system call; the same event's
 * PERF_RECORD_SWITCH records give the switch-in.  The interval between
 * the two is charged to the switch-out stack: to samples_offcpu.* when the
 * thread blocked (not when it was preempted), and to samples_realtime.*
 * either way, next to the CPU samples, so that every thread's wall time
 * adds up. */
#include "sample_perf_offcpu.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A thread between its switch-out and its switch-in. */
typedef struct off_thread {
  pid_t tid; /* 0: empty slot */
  pid_t pid;
  bool out;     /* a switch-out sample is pending */
  bool preempt; /* the switch-out record said: preempted, still runnable */
  uint64_t t_out;
  size_t n;
  bool truncated;
  uint64_t *pcs; /* depth entries */
} off_thread_t;

struct offcpu {
  off_thread_t *slot;
  size_t cap, len;
  size_t depth;
  uint64_t unmatched; /* switch-outs replaced before their switch-in (a record lost) */
  int *fds; /* attached threads' events writing into another's ring */
  size_t nfds, capfds;
};

static off_thread_t *slot_of(offcpu_t *oc, pid_t tid, bool add) {
  if (add && (oc->len + 1) * 2 > oc->cap) {
    size_t cap = oc->cap ? 2 * oc->cap : 256;
    off_thread_t *n = calloc(cap, sizeof *n);
    if (!n)
      return NULL;
    for (size_t i = 0; i < oc->cap; ++i) {
      if (!oc->slot[i].tid)
        continue;
      size_t j = (size_t)oc->slot[i].tid * 0x9e3779b1u & (cap - 1);
      while (n[j].tid)
        j = (j + 1) & (cap - 1);
      n[j] = oc->slot[i];
    }
    free(oc->slot);
    oc->slot = n;
    oc->cap = cap;
  }
  if (!oc->cap)
    return NULL;
  size_t i = (size_t)tid * 0x9e3779b1u & (oc->cap - 1);
  while (oc->slot[i].tid && oc->slot[i].tid != tid)
    i = (i + 1) & (oc->cap - 1);
  if (oc->slot[i].tid == tid)
    return &oc->slot[i];
  if (!add)
    return NULL;
  uint64_t *pcs = calloc(oc->depth, sizeof *pcs);
  if (!pcs)
    return NULL;
  oc->slot[i] = (off_thread_t){.tid = tid, .pcs = pcs};
  oc->len++;
  return &oc->slot[i];
}

offcpu_t *offcpu_new(size_t depth) {
  offcpu_t *oc = calloc(1, sizeof *oc);
  if (oc)
    oc->depth = depth ? depth : 1;
  return oc;
}

void offcpu_free(offcpu_t *oc) {
  if (!oc)
    return;
  for (size_t i = 0; i < oc->cap; ++i)
    free(oc->slot[i].pcs);
  for (size_t i = 0; i < oc->nfds; ++i)
    close(oc->fds[i]);
  free(oc->fds);
  free(oc->slot);
  free(oc);
}

void offcpu_unavailable(const sample_perf_opts_t *o, offcpu_t **oc) {
  offcpu_free(*oc);
  *oc = NULL;
  fprintf(stderr, "xptrace sample: no %s profile: context-switch samples need %s\n",
          o->off_cpu ? "off-CPU" : "wall-time",
          o->fp ? "--call-graph dwarf" : "kernel sampling (root, or kernel.perf_event_paranoid <= 1)");
}

/* The context-switch event: every switch-out sampled, with the user
 * registers and stack the kernel saved at the system call. */
static void switch_attr(const sample_perf_opts_t *o, struct perf_event_attr *a, bool attach) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->type = PERF_TYPE_SOFTWARE;
  a->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
  a->sample_period = 1; /* every switch-out */
  a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
                   PERF_SAMPLE_STACK_USER;
  a->sample_regs_user = UNW_REGS_MASK; /* as of the system call: the kernel saved them */
  a->sample_stack_user = o->stack_size;
  a->disabled = !attach; /* a command: from its exec; a running thread: now */
  a->inherit = 1; /* the tree only: the event follows its threads, not the CPUs' other tasks */
  a->enable_on_exec = !attach;
  a->exclude_hv = 1; /* the switch happens in the kernel: kernel mode not excluded */
  a->exclude_callchain_kernel = 1;
  a->context_switch = 1; /* PERF_RECORD_SWITCH: in and out */
  a->sample_id_all = 1;
  a->use_clockid = 1;
  a->clockid = CLOCK_MONOTONIC;
  a->watermark = 1;
  a->wakeup_watermark = 128 * 1024;
}

static bool map_ring(int fd, ring_t *r) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = 256;
  void *m = MAP_FAILED;
  for (; pages >= 1; pages /= 2) { /* the locked-memory allowance may be small */
    m = mmap(NULL, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED || errno != EPERM)
      break;
  }
  if (m == MAP_FAILED)
    return false;
  *r = (ring_t){fd, m, (unsigned char *)m + page, pages * page, (pages + 1) * page, true};
  return true;
}

size_t offcpu_open_rings(const sample_perf_opts_t *o, pid_t pid, ring_t **rings, size_t n) {
  struct perf_event_attr a;
  switch_attr(o, &a, false);
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  ring_t *r = realloc(*rings, (n + (size_t)(ncpu > 0 ? ncpu : 1)) * sizeof *r);
  if (!r)
    return n;
  *rings = r;
  for (long cpu = 0; cpu < ncpu; ++cpu) {
    int fd = (int)syscall(SYS_perf_event_open, &a, pid, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0)
      continue;
    if (map_ring(fd, &r[n]))
      n++;
    else
      close(fd);
  }
  return n;
}

static void keep_fd(offcpu_t *oc, int fd) {
  if (oc->nfds == oc->capfds) {
    size_t cap = oc->capfds ? 2 * oc->capfds : 64;
    int *f = realloc(oc->fds, cap * sizeof *f);
    if (!f) {
      close(fd); /* that thread's switches go unseen */
      return;
    }
    oc->fds = f;
    oc->capfds = cap;
  }
  oc->fds[oc->nfds++] = fd;
}

size_t offcpu_attach_rings(const sample_perf_opts_t *o, offcpu_t *oc, const pid_t *pids, size_t npids,
                           ring_t **rings, size_t n, size_t *nthreads, size_t *nseen, int *err) {
  struct perf_event_attr a;
  switch_attr(o, &a, true);
  long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  if (ncpu < 1)
    ncpu = 1;
  ring_t *r = realloc(*rings, (n + (size_t)ncpu) * sizeof *r);
  if (!r)
    return n;
  *rings = r;
  /* One ring per CPU; every thread's event on that CPU writes into it. */
  int *ring_fd = malloc((size_t)ncpu * sizeof *ring_fd);
  if (!ring_fd)
    return n;
  for (long cpu = 0; cpu < ncpu; ++cpu)
    ring_fd[cpu] = -1;
  *nthreads = *nseen = 0;
  *err = 0;
  /* Descriptors held back from the events for what comes after them:
   * /proc reads, the unwinder's and symbolizer's files, the outputs
   * (without these, at ulimit -n 40 and 31 threads nothing was written). */
  int spare[OFFCPU_SPARE_FDS];
  for (size_t k = 0; k < OFFCPU_SPARE_FDS; ++k)
    spare[k] = open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (size_t i = 0; i < npids; ++i) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pids[i]);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
      pid_t tid = (pid_t)atoi(e->d_name);
      bool any = false;
      *nseen += tid > 0;
      for (long cpu = 0; tid > 0 && cpu < ncpu; ++cpu) {
        /* Per thread and CPU: the kernel maps no inherited event that
         * follows a thread across CPUs; inherit takes its new threads. */
        int fd = (int)syscall(SYS_perf_event_open, &a, tid, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0) {
          if (errno != ESRCH && errno != ENODEV) /* ended meanwhile; an offline CPU */
            *err = errno;
          continue;
        }
        if (ring_fd[cpu] < 0 && map_ring(fd, &r[n])) {
          ring_fd[cpu] = fd;
          n++;
          any = true;
        } else if (ring_fd[cpu] >= 0 && ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring_fd[cpu]) == 0) {
          keep_fd(oc, fd);
          any = true;
        } else {
          close(fd);
        }
      }
      *nthreads += any;
    }
    if (d)
      closedir(d);
  }
  for (size_t k = 0; k < OFFCPU_SPARE_FDS; ++k)
    if (spare[k] >= 0)
      close(spare[k]);
  free(ring_fd);
  return n;
}

/* A switch-out sample: unwind now (the unwinder follows the mappings as
 * of this time) and keep the stack until the switch-in. */
static void switch_out(perf_state_t *s, const unsigned char *p, const unsigned char *end) {
  perf_head_t h;
  perf_user_t u;
  if (!perf_take(&p, end, &h, sizeof h) || (int32_t)h.tid <= 0 || !perf_take_user(&p, end, &u) ||
      u.abi == PERF_SAMPLE_REGS_ABI_NONE)
    return; /* cut short, or no user context: a kernel thread */
  off_thread_t *t = slot_of(s->off, (pid_t)h.tid, true);
  if (!t)
    return;
  if (t->out)
    s->off->unmatched++;
  unw_result_t r;
  t->pid = (pid_t)h.pid;
  t->n = unw_stack(s->unw, (pid_t)h.pid, (pid_t)h.tid, u.regs, u.stack, u.dyn, t->pcs, s->off->depth, &r);
  t->truncated = r == UNW_TRUNCATED;
  t->t_out = h.time;
  t->out = true;
}

bool offcpu_record(perf_state_t *s, const struct perf_event_header *hdr) {
  const unsigned char *p = (const unsigned char *)(hdr + 1);
  const unsigned char *end = (const unsigned char *)hdr + hdr->size;
  if (hdr->type == XP_RECORD_SWITCH_SAMPLE) {
    switch_out(s, p, end);
    return true;
  }
  if (hdr->type != PERF_RECORD_SWITCH)
    return false;
  /* sample_id_all: {pid, tid, time} ends it. */
  uint32_t ids[2];
  uint64_t t;
  if (end - p < 16)
    return true;
  memcpy(ids, end - 16, 8);
  memcpy(&t, end - 8, 8);
  off_thread_t *x = slot_of(s->off, (pid_t)ids[1], hdr->misc & PERF_RECORD_MISC_SWITCH_OUT);
  if (!x)
    return true;
  if (hdr->misc & PERF_RECORD_MISC_SWITCH_OUT) {
    x->preempt = hdr->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT;
    return true;
  }
  if (x->out && t > x->t_out && perf_in_window(s, x->pid, x->tid, x->t_out, false)) {
    /* Microseconds: wall time, whatever the sampling rate. */
    uint64_t us = (t - x->t_out + 500) / 1000;
    if (!x->preempt && s->o->off_cpu)
      xs_sample(s->session, XS_OFFCPU, x->pid, x->tid, x->t_out, us, x->pcs, x->n, x->truncated);
    if (s->o->realtime)
      xs_sample(s->session, XS_REALTIME, x->pid, x->tid, x->t_out, us, x->pcs, x->n, x->truncated);
  }
  x->out = false;
  x->preempt = false;
  return true;
}

void offcpu_exit(perf_state_t *s, pid_t tid) {
  off_thread_t *x = s->off ? slot_of(s->off, tid, false) : NULL;
  if (x) {
    x->out = false; /* its last switch-out has no switch-in */
    x->preempt = false;
  }
}
