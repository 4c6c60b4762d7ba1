/* DWARF unwinding of copied user stacks with libdwfl (sample_perf.c):
 * one Dwfl per process mirrors its live file mappings; a sample's
 * registers and stack copy are handed to libdwfl's unwinder through our
 * own thread callbacks, so nothing reads the (maybe gone) process. */
#include "sample_perf_unwind.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct umap {
  uint64_t start, end, pgoff;
  char *path;
} umap_t;

/* What each file's ELF says, read once: its type and load segments. */
typedef struct elfinfo {
  char *path;
  int type; /* ET_*, 0 unreadable */
  GElf_Phdr *load;
  size_t nload;
} elfinfo_t;

typedef struct uproc {
  pid_t pid;
  umap_t *maps;
  size_t nmaps, capmaps;
  Dwfl *dwfl;
  bool dirty, attached;
  /* the sample being unwound */
  pid_t tid;
  const uint64_t *regs;
  const uint8_t *stack;
  uint64_t sp, stack_len;
  bool out_of_copy; /* a read fell outside the copy */
} uproc_t;

struct unw {
  uproc_t **procs; /* each apart: libdw keeps a pointer to it (dwfl_attach_state) */
  size_t nprocs, capprocs;
  elfinfo_t *elfs;
  size_t nelfs, capelfs;
};

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

static bool grow(void *v, size_t *cap, size_t n, size_t sz) {
  if (n < *cap)
    return true;
  size_t c = *cap ? 2 * *cap : 32;
  void *p = realloc(*(void **)v, c * sz);
  if (!p)
    return false;
  *(void **)v = p;
  *cap = c;
  return true;
}

unw_t *unw_new(void) {
  elf_version(EV_CURRENT);
  return calloc(1, sizeof(unw_t));
}

static void proc_clear(uproc_t *p) {
  for (size_t i = 0; i < p->nmaps; ++i)
    free(p->maps[i].path);
  p->nmaps = 0;
  p->dirty = true;
}

void unw_free(unw_t *u) {
  if (!u)
    return;
  for (size_t i = 0; i < u->nprocs; ++i) {
    proc_clear(u->procs[i]);
    free(u->procs[i]->maps);
    if (u->procs[i]->dwfl)
      dwfl_end(u->procs[i]->dwfl);
    free(u->procs[i]);
  }
  free(u->procs);
  for (size_t i = 0; i < u->nelfs; ++i) {
    free(u->elfs[i].path);
    free(u->elfs[i].load);
  }
  free(u->elfs);
  free(u);
}

/* u is NULL with --call-graph fp (or out of memory): nothing is tracked. */
static uproc_t *proc_find(unw_t *u, pid_t pid) {
  if (!u)
    return NULL;
  for (size_t i = u->nprocs; i-- > 0;)
    if (u->procs[i]->pid == pid)
      return u->procs[i];
  return NULL;
}

static uproc_t *proc_get(unw_t *u, pid_t pid) {
  uproc_t *p = proc_find(u, pid);
  if (p || !u || !grow(&u->procs, &u->capprocs, u->nprocs, sizeof *u->procs))
    return p;
  if (!(p = calloc(1, sizeof *p)))
    return NULL;
  u->procs[u->nprocs++] = p;
  p->pid = pid;
  return p;
}

static void map_push(uproc_t *p, uint64_t start, uint64_t end, uint64_t pgoff, const char *path) {
  /* A new mapping replaces what it overlaps. */
  size_t k = 0;
  for (size_t i = 0; i < p->nmaps; ++i) {
    if (p->maps[i].start < end && start < p->maps[i].end)
      free(p->maps[i].path);
    else
      p->maps[k++] = p->maps[i];
  }
  /* Anonymous code (a JIT's) changes no module: no new Dwfl for it. */
  p->dirty |= k < p->nmaps;
  p->nmaps = k;
  if (path[0] != '/' || !grow(&p->maps, &p->capmaps, p->nmaps, sizeof *p->maps))
    return;
  char *copy = strdup(path);
  if (copy) {
    p->maps[p->nmaps++] = (umap_t){start, end, pgoff, copy};
    p->dirty = true;
  }
}

void unw_mapping(unw_t *u, pid_t pid, uint64_t start, uint64_t end, uint64_t pgoff, const char *path) {
  uproc_t *p = proc_get(u, pid);
  if (p)
    map_push(p, start, end, pgoff, path);
}

void unw_exec(unw_t *u, pid_t pid) {
  uproc_t *p = proc_find(u, pid);
  if (!p)
    return;
  proc_clear(p);
  /* A new program: a new address space, a new unwinder state. */
  if (p->dwfl)
    dwfl_end(p->dwfl);
  p->dwfl = NULL;
  p->attached = false;
}

void unw_fork(unw_t *u, pid_t parent, pid_t child) {
  if (!proc_get(u, child))
    return;
  uproc_t *pp = proc_find(u, parent), *c = proc_find(u, child);
  if (!pp || pp == c)
    return;
  for (size_t i = 0; i < pp->nmaps; ++i)
    map_push(c, pp->maps[i].start, pp->maps[i].end, pp->maps[i].pgoff, pp->maps[i].path);
}

void unw_exit(unw_t *u, pid_t pid) { unw_exec(u, pid); }

static const elfinfo_t *elf_info(unw_t *u, const char *path) {
  for (size_t i = 0; i < u->nelfs; ++i)
    if (strcmp(u->elfs[i].path, path) == 0)
      return &u->elfs[i];
  if (!grow(&u->elfs, &u->capelfs, u->nelfs, sizeof *u->elfs))
    return NULL;
  elfinfo_t *e = &u->elfs[u->nelfs];
  memset(e, 0, sizeof *e);
  if (!(e->path = strdup(path)))
    return NULL;
  u->nelfs++;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
  GElf_Ehdr eh;
  size_t n;
  if (elf && gelf_getehdr(elf, &eh) && elf_getphdrnum(elf, &n) == 0 &&
      (e->load = calloc(n ? n : 1, sizeof *e->load))) {
    e->type = eh.e_type;
    for (size_t i = 0; i < n; ++i) {
      GElf_Phdr ph;
      if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
        e->load[e->nload++] = ph;
    }
  }
  if (elf)
    elf_end(elf);
  if (fd >= 0)
    close(fd);
  return e;
}

/* Report every live file mapping as a module at its load bias, to a new
 * Dwfl: one that was attached and unwound through, then given more modules
 * by another report, unwinds through none of the new ones (elfutils 0.188:
 * one sample in ld.so's start-up cut every later stack at libc). */
static void report(unw_t *u, uproc_t *p) {
  if (p->dwfl)
    dwfl_end(p->dwfl);
  p->attached = false;
  if (!(p->dwfl = dwfl_begin(&callbacks)))
    return;
  dwfl_report_begin(p->dwfl);
  for (size_t i = 0; i < p->nmaps; ++i) {
    const umap_t *m = &p->maps[i];
    const elfinfo_t *e = elf_info(u, m->path);
    if (!e || !e->type)
      continue;
    /* The segment this mapping shows: its ELF address at pgoff. */
    uint64_t base = 0;
    bool found = false;
    for (size_t k = 0; k < e->nload && !found; ++k) {
      const GElf_Phdr *ph = &e->load[k];
      if (m->pgoff >= (ph->p_offset & ~(uint64_t)0xfff) && m->pgoff < ph->p_offset + ph->p_filesz) {
        base = m->start - (ph->p_vaddr - (ph->p_offset - m->pgoff));
        found = true;
      }
    }
    if (!found)
      continue;
    if (e->type == ET_EXEC)
      base = 0;
    const char *name = strrchr(m->path, '/');
    /* Several mappings of one file: the first reported stands. */
    dwfl_report_elf(p->dwfl, name ? name + 1 : m->path, m->path, -1, base, false);
  }
  dwfl_report_end(p->dwfl, NULL, NULL);
  p->dirty = false;
}

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_arg) {
  (void)dwfl;
  uproc_t *p = arg;
  if (*thread_arg)
    return 0;
  *thread_arg = p;
  return p->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_arg) {
  (void)dwfl;
  (void)tid;
  *thread_arg = arg;
  return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg) {
  (void)dwfl;
  uproc_t *p = arg;
  if (addr >= p->sp && addr + 8 <= p->sp + p->stack_len) {
    memcpy(result, p->stack + (addr - p->sp), 8);
    return true;
  }
  /* Outside the copy: constant data of a mapped file (rarely needed). */
  for (size_t i = 0; i < p->nmaps; ++i) {
    const umap_t *m = &p->maps[i];
    if (addr >= m->start && addr + 8 <= m->end) {
      int fd = open(m->path, O_RDONLY | O_CLOEXEC);
      bool ok = fd >= 0 && pread(fd, result, 8, (off_t)(addr - m->start + m->pgoff)) == 8;
      if (fd >= 0)
        close(fd);
      return ok;
    }
  }
  if (addr >= p->sp - 4096 && addr < p->sp + (1u << 20))
    p->out_of_copy = true; /* the stack went on beyond the copy */
  return false;
}

/* perf's user registers (mask: AX..IP, R8..R15) in DWARF x86-64 order. */
static bool set_initial_registers(Dwfl_Thread *thread, void *arg) {
  const uint64_t *v = ((uproc_t *)arg)->regs;
  Dwarf_Word r[17] = {v[0], v[3], v[2], v[1], v[4], v[5], v[6], v[7], v[9],
                      v[10], v[11], v[12], v[13], v[14], v[15], v[16], v[8]};
  return dwfl_thread_state_registers(thread, 0, 17, r);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
    .next_thread = next_thread,
    .get_thread = get_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
};

typedef struct walk {
  uint64_t *pc;
  size_t n, max;
  bool full;
} walk_t;

static int on_frame(Dwfl_Frame *state, void *arg) {
  walk_t *w = arg;
  Dwarf_Addr pc;
  bool activation;
  if (!dwfl_frame_pc(state, &pc, &activation))
    return DWARF_CB_ABORT;
  if (pc == 0)
    return DWARF_CB_ABORT;
  if (w->n == w->max) {
    w->full = true;
    return DWARF_CB_ABORT;
  }
  w->pc[w->n++] = pc;
  return DWARF_CB_OK;
}

size_t unw_stack(unw_t *u, pid_t pid, pid_t tid, const uint64_t regs[UNW_NREGS], const uint8_t *stack,
                 size_t stack_len, uint64_t *pc, size_t max, unw_result_t *res) {
  *res = UNW_COMPLETE;
  uproc_t *p = proc_find(u, pid);
  if (!p || max == 0) {
    if (max)
      pc[0] = regs[8];
    *res = UNW_CUT;
    return max ? 1 : 0;
  }
  if (p->dirty || !p->dwfl)
    report(u, p);
  if (p->dwfl && !p->attached && dwfl_attach_state(p->dwfl, NULL, pid, &thread_callbacks, p))
    p->attached = true;
  p->tid = tid;
  p->regs = regs;
  p->stack = stack;
  p->stack_len = stack_len;
  p->sp = regs[7];
  p->out_of_copy = false;
  walk_t w = {pc, 0, max, false};
  int rc = p->attached ? dwfl_getthread_frames(p->dwfl, tid, on_frame, &w) : -1;
  if (w.n == 0) {
    pc[w.n++] = regs[8];
    *res = UNW_CUT;
  } else if (w.full) {
    *res = UNW_TRUNCATED;
  } else if (rc != 0) {
    *res = UNW_CUT;
  }
  p->regs = NULL;
  p->stack = NULL;
  return w.n;
}
