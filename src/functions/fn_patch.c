/* xptrace function hooks — patching the function entries of the program
 * and, with a regex, of the libraries loaded with it.
 *
 * Runs from the library's constructor, before main: no thread of the
 * program exists yet, so no thread can execute bytes being rewritten.
 * The functions are those of each module's symbol table in executable
 * sections other than .init/.fini/.plt: never ours nor the C library's.
 * A module's entries are written only once all its stubs are executable
 * (libdw, walking the next module, may call into patched ones).
 *
 *  - a 5-byte nop at the entry (-pg -mfentry -mnop-mcount,
 *    -fpatchable-function-entry=5) becomes `jmp stub`; the stub calls
 *    fn_tramp_enter and jumps back after the nop.  Unselected functions
 *    keep their nop.
 *  - otherwise (unmodified code: the program's functions, with a regex
 *    its libraries' too), the first
 *    instructions (5 bytes or more) move into the stub, relocated
 *    (capstone decodes them), and the entry becomes `jmp stub`; the stub
 *    calls fn_tramp_enter, runs the moved instructions and jumps back.
 *    Relative jumps and calls among them become absolute ones (a call
 *    still returns into the function: exceptions unwind through it).  Refused,
 *    with one line each (with no regex, counted in one line): too short, a loop/jrcxz among the moved
 *    instructions, a branch of the function into the moved bytes, a
 *    RIP-relative operand out of reach.
 * Stubs live within 2 GiB of the program (rel32 reach). */
#include <capstone/capstone.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fn_internal.h"
#include "fn_stub.h"
#include "xpt_msg.h"

#define FN_PATCH_LEN 5

typedef struct fn_site {
  uintptr_t at;                 /* the patched bytes */
  uint8_t saved[FN_PATCH_LEN];  /* what they were */
  uint8_t jmp[FN_PATCH_LEN];    /* what they become */
} fn_site_t;

/* A selected function, found while libdw walks a module's symbols and
 * patched after the walk: libdw may call into the module itself (zlib,
 * liblzma for compressed sections), and must not meet a patched entry
 * whose stub is not executable yet. */
typedef struct fn_candidate {
  uintptr_t func, at;
  size_t size;
  fn_func_t *fn;
  char *name;
  bool nop;
} fn_candidate_t;

static struct {
  fn_site_t *sites;
  size_t nsites, cap;
  fn_candidate_t *cands;
  size_t ncands, cands_cap;
  uint8_t *stubs;
  size_t stub_used, stub_cap;
  uintptr_t lo, hi; /* the mapped range of the module being patched */
  csh cs;
  bool cs_open;
  /* No regex: every function of the program is tried, and those refused
   * are counted (one line at the end) rather than named one by one. */
  unsigned no_size, too_short, unmovable;
} fp;

static void fn_refuse(const char *name, size_t size, const char *why) {
  if (fn_cfg.has_select) {
    if (why)
      xpt_msg("xpti: functions: cannot patch %s: %s", name, why);
    else
      xpt_msg("xpti: functions: cannot patch %s: too short (%zu bytes)", name, size);
  } else if (why)
    ++fp.unmovable;
  else
    ++*(size ? &fp.too_short : &fp.no_size);
}

/* Stubs for n functions, mapped within reach of the whole program. */
static bool fn_stubs_map(size_t n) {
  size_t len = (n * FN_STUB_SIZE + 0xffff) & ~(size_t)0xffff;
  for (uintptr_t step = 0; step < (1u << 30); step += 0x100000) {
    uintptr_t hint = ((fp.hi + 0xfffff) & ~(uintptr_t)0xfffff) + step;
    void *p = mmap((void *)hint, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED)
      continue;
    if ((uintptr_t)p + len - fp.lo < (1ull << 31) - 1) {
      fp.stubs = p;
      fp.stub_cap = len;
      return true;
    }
    munmap(p, len);
  }
  return false;
}

static bool fn_near(uintptr_t from, uintptr_t to) {
  int64_t d = (int64_t)to - (int64_t)from;
  return d >= INT32_MIN && d <= INT32_MAX;
}

static void put_rel32(uint8_t *p, uintptr_t next, uintptr_t target) {
  int32_t rel = (int32_t)((int64_t)target - (int64_t)next);
  memcpy(p, &rel, 4);
}

static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static bool fn_site_add(uintptr_t at, const uint8_t *jmp) {
  if (fp.nsites == fp.cap) {
    size_t cap = fp.cap ? 2 * fp.cap : 256;
    fn_site_t *s = realloc(fp.sites, cap * sizeof *s);
    if (!s)
      return false;
    fp.sites = s;
    fp.cap = cap;
  }
  fn_site_t *s = &fp.sites[fp.nsites++];
  s->at = at;
  memcpy(s->saved, (const void *)at, FN_PATCH_LEN);
  memcpy(s->jmp, jmp, FN_PATCH_LEN);
  return true;
}

/* Write bytes into the program's text (made writable for the moment). */
static bool fn_text_write(uintptr_t at, const uint8_t *bytes, size_t n) {
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = at & ~(uintptr_t)(page - 1);
  size_t len = ((at + n + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1)) - start;
  if (mprotect((void *)start, len, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
    return false;
  memcpy((void *)at, bytes, n);
  mprotect((void *)start, len, PROT_READ | PROT_EXEC);
  __builtin___clear_cache((char *)at, (char *)at + n);
  return true;
}

static bool fn_is_nop5(const uint8_t *p) {
  static const uint8_t ones[5] = {0x90, 0x90, 0x90, 0x90, 0x90};
  return (p[0] == 0x0f && p[1] == 0x1f && p[2] == 0x44 && p[3] == 0x00) ||
         memcmp(p, ones, 5) == 0;
}

static bool fn_is_endbr64(const uint8_t *p) {
  return p[0] == 0xf3 && p[1] == 0x0f && p[2] == 0x1e && p[3] == 0xfa;
}

/* A stub (fn_stub.h): fn_tramp_enter finds fn from its return address,
 * using no register, as gcc's -fipa-ra may keep values in any
 * call-clobbered register across a call to a function it knows.  Returns
 * where the moved instructions go. */
uint8_t *fn_stub_begin(uint8_t *stub, fn_func_t *fn) {
  stub[0] = 0xff, stub[1] = 0x15; /* call *[rip] */
  put_rel32(stub + 2, (uintptr_t)stub + FN_STUB_CALLED, (uintptr_t)stub + FN_STUB_DATA);
  stub[FN_STUB_CALLED] = 0xe8; /* call body */
  put_rel32(stub + FN_STUB_CALLED + 1, (uintptr_t)stub + FN_STUB_LANDING,
            (uintptr_t)stub + FN_STUB_BODY);
  stub[FN_STUB_LANDING] = 0xff, stub[FN_STUB_LANDING + 1] = 0x25; /* jmp *[rip] */
  put_rel32(stub + FN_STUB_LANDING + 2, (uintptr_t)stub + FN_STUB_BODY,
            (uintptr_t)stub + FN_STUB_DATA + 16);
  put_u64(stub + FN_STUB_DATA, (uint64_t)(uintptr_t)fn_tramp_enter);
  put_u64(stub + FN_STUB_DATA + 8, (uint64_t)(uintptr_t)fn);
  put_u64(stub + FN_STUB_DATA + 16, (uint64_t)(uintptr_t)fn_tramp_exit);
  fn->landing = (uintptr_t)stub + FN_STUB_LANDING;
  return stub + FN_STUB_BODY;
}

void fn_stub_end(uint8_t *p, uintptr_t back) {
  static const uint8_t jmp_abs[6] = {0xff, 0x25, 0, 0, 0, 0};
  memcpy(p, jmp_abs, 6);
  put_u64(p + 6, (uint64_t)back);
}

/* The entry is to become `jmp stub` (what follows in the moved bytes is
 * never reached: nothing branches there), once every stub of the module is
 * executable. */
static bool fn_stub_install(uintptr_t at) {
  uint8_t *stub = fp.stubs + fp.stub_used;
  uint8_t jmp[FN_PATCH_LEN] = {0xe9};
  put_rel32(jmp + 1, at + 5, (uintptr_t)stub);
  if (!fn_site_add(at, jmp))
    return false;
  fp.stub_used += FN_STUB_SIZE;
  return true;
}

/* A nop entry: nothing to move. */
static bool fn_patch_nop(uintptr_t at, fn_func_t *fn) {
  if (!fn_near(at + 5, (uintptr_t)(fp.stubs + fp.stub_used)))
    return false;
  fn_stub_end(fn_stub_begin(fp.stubs + fp.stub_used, fn), at + FN_PATCH_LEN);
  return fn_stub_install(at);
}

/* A relative jmp, jcc or call moved into the stub becomes its absolute
 * form (at most 16 bytes); false: not one of those. */
static bool fn_relocate_branch(const cs_insn *in, uint8_t **pp) {
  const cs_x86 *x = &in->detail->x86;
  if (x->op_count != 1 || x->operands[0].type != X86_OP_IMM)
    return false;
  uint64_t target = (uint64_t)x->operands[0].imm;
  const uint8_t *b = in->bytes;
  uint8_t *p = *pp;
  static const uint8_t jmp_abs[6] = {0xff, 0x25, 0, 0, 0, 0};
  int cond = -1;
  if (b[0] >= 0x70 && b[0] <= 0x7f)
    cond = b[0] & 0xf;
  else if (b[0] == 0x0f && b[1] >= 0x80 && b[1] <= 0x8f)
    cond = b[1] & 0xf;
  if (in->id == X86_INS_CALL && b[0] == 0xe8) {
    /* The callee must return into the function itself (the unwinder knows
     * no stub): push the original return address, which lies past the
     * patched bytes (a call ending inside them is refused), and jump. */
    uint64_t ret = in->address + in->size;
    static const uint8_t lea[5] = {0x48, 0x8d, 0x64, 0x24, 0xf8}; /* lea -8(%rsp),%rsp */
    memcpy(p, lea, 5);
    p[5] = 0xc7, p[6] = 0x04, p[7] = 0x24; /* movl $lo, (%rsp) */
    uint32_t lo = (uint32_t)ret, hi = (uint32_t)(ret >> 32);
    memcpy(p + 8, &lo, 4);
    p[12] = 0xc7, p[13] = 0x44, p[14] = 0x24, p[15] = 0x04; /* movl $hi, 4(%rsp) */
    memcpy(p + 16, &hi, 4);
    memcpy(p + 20, jmp_abs, 6);
    put_u64(p + 26, target);
    *pp = p + 34;
    return true;
  }
  if (in->id == X86_INS_JMP && (b[0] == 0xe9 || b[0] == 0xeb)) {
    memcpy(p, jmp_abs, 6);
    put_u64(p + 6, target);
    *pp = p + 14;
    return true;
  }
  if (cond >= 0) {
    p[0] = (uint8_t)(0x70 | (cond ^ 1)); /* the opposite condition skips the jump */
    p[1] = 14;
    memcpy(p + 2, jmp_abs, 6);
    put_u64(p + 8, target);
    *pp = p + 16;
    return true;
  }
  return false;
}

/* Unmodified entry: move the first instructions into the stub. */
static bool fn_patch_entry(const char *name, uintptr_t func, size_t size, uintptr_t at,
                           fn_func_t *fn) {
  uintptr_t end = func + size;
  if (end - at < FN_PATCH_LEN) {
    fn_refuse(name, size, NULL);
    return false;
  }
  cs_insn *insn = NULL;
  size_t count = cs_disasm(fp.cs, (const uint8_t *)at, end - at, at, 0, &insn);
  size_t moved = 0, nmoved = 0;
  while (nmoved < count && moved < FN_PATCH_LEN)
    moved += insn[nmoved++].size;
  const char *why = NULL;
  if (moved < FN_PATCH_LEN)
    why = "its first instructions do not decode";
  for (size_t i = 0; !why && i < count; ++i) {
    const cs_insn *in = &insn[i];
    const cs_x86 *x = &in->detail->x86;
    bool branch = false;
    for (uint8_t g = 0; g < in->detail->groups_count; ++g)
      if (in->detail->groups[g] == X86_GRP_JUMP || in->detail->groups[g] == X86_GRP_CALL ||
          in->detail->groups[g] == X86_GRP_BRANCH_RELATIVE)
        branch = true;
    if (branch && x->op_count == 1 && x->operands[0].type == X86_OP_IMM) {
      uintptr_t target = (uintptr_t)x->operands[0].imm;
      if (i < nmoved && in->id == X86_INS_CALL && in->address + in->size < at + FN_PATCH_LEN)
        why = "a call returning into its first 5 bytes";
      else if (i < nmoved && (in->id == X86_INS_LOOP || in->id == X86_INS_LOOPE ||
                         in->id == X86_INS_LOOPNE || in->id == X86_INS_JRCXZ ||
                         in->id == X86_INS_JECXZ))
        why = "a loop branch in its first 5 bytes";
      else if (target > at && target < at + moved)
        why = "a branch into its first 5 bytes";
    }
  }
  uint8_t *stub = fp.stubs + fp.stub_used;
  uint8_t *p = stub + FN_STUB_BODY;
  for (size_t i = 0; !why && i < nmoved; ++i) {
    const cs_insn *in = &insn[i];
    const cs_x86 *x = &in->detail->x86;
    if (p + 34 + 14 > stub + FN_STUB_DATA) { /* the longest relocation, then the way back */
      why = "too many instructions to move";
      break;
    }
    if (fn_relocate_branch(in, &p))
      continue;
    memcpy(p, in->bytes, in->size);
    bool rip = false;
    for (uint8_t k = 0; k < x->op_count; ++k)
      if (x->operands[k].type == X86_OP_MEM && x->operands[k].mem.base == X86_REG_RIP)
        rip = true;
    if (rip) {
      uint8_t off = x->encoding.disp_offset;
      uintptr_t target = (uintptr_t)(in->address + in->size + x->disp);
      uintptr_t next = (uintptr_t)p + in->size;
      if (!off || x->encoding.disp_size != 4 || !fn_near(next, target))
        why = "a RIP-relative form not handled";
      else
        put_rel32(p + off, next, target);
    }
    p += in->size;
  }
  if (!why && !fn_near(at + 5, (uintptr_t)stub))
    why = "no room for its stub within 2 GiB";
  if (why) {
    fn_refuse(name, size, why);
    cs_free(insn, count);
    return false;
  }
  cs_free(insn, count);
  fn_stub_end(p, at + moved);
  fn_stub_begin(stub, fn);
  return fn_stub_install(at);
}

/* The program's ELF file, its symbol table (or the dynamic one). */
typedef struct fn_elf {
  int fd;
  Elf *elf;
  Elf_Scn *symtab;
  GElf_Shdr symhdr;
} fn_elf_t;

static bool fn_elf_open(fn_elf_t *e) {
  elf_version(EV_CURRENT);
  e->fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (e->fd < 0)
    return false;
  e->elf = elf_begin(e->fd, ELF_C_READ, NULL);
  e->symtab = NULL;
  Elf_Scn *dyn = NULL;
  GElf_Shdr dynhdr;
  for (Elf_Scn *s = NULL; e->elf && (s = elf_nextscn(e->elf, s));) {
    GElf_Shdr h;
    if (!gelf_getshdr(s, &h))
      continue;
    if (h.sh_type == SHT_SYMTAB)
      e->symtab = s, e->symhdr = h;
    else if (h.sh_type == SHT_DYNSYM)
      dyn = s, dynhdr = h;
  }
  if (!e->symtab && dyn)
    e->symtab = dyn, e->symhdr = dynhdr;
  return e->symtab != NULL;
}

static void fn_elf_close(fn_elf_t *e) {
  if (e->elf)
    elf_end(e->elf);
  if (e->fd >= 0)
    close(e->fd);
}

/* name is hook, or hook@VERSION (.symtab's "mcount@GLIBC_2.2.5"). */
static bool fn_hook_name(const char *name, const char *hook) {
  size_t n = strlen(hook);
  return strncmp(name, hook, n) == 0 && (name[n] == '\0' || name[n] == '@');
}

/* Compiler hooks: -finstrument-functions, or -pg's calls of mcount or
 * __fentry__ (not -mnop-mcount's nops, which are patched). */
bool fn_program_has_cyg_hooks(void) {
  fn_elf_t e = {-1, NULL, NULL, {0}};
  bool found = false;
  if (fn_elf_open(&e)) {
    Elf_Data *d = elf_getdata(e.symtab, NULL);
    size_t n = e.symhdr.sh_entsize ? e.symhdr.sh_size / e.symhdr.sh_entsize : 0;
    for (size_t i = 0; d && i < n && !found; ++i) {
      GElf_Sym sym;
      const char *name;
      if (gelf_getsym(d, (int)i, &sym) && (name = elf_strptr(e.elf, e.symhdr.sh_link, sym.st_name)))
        found = fn_hook_name(name, "__cyg_profile_func_enter") ||
                (sym.st_shndx == SHN_UNDEF && (fn_hook_name(name, "mcount") ||
                                               fn_hook_name(name, "__fentry__")));
    }
  }
  fn_elf_close(&e);
  return found;
}

/* Functions to patch: the program's own code sections only. */
static bool fn_section_ok(Elf *elf, size_t shstrndx, size_t index) {
  Elf_Scn *s = elf_getscn(elf, index);
  GElf_Shdr h;
  if (!s || !gelf_getshdr(s, &h) || !(h.sh_flags & SHF_EXECINSTR))
    return false;
  const char *name = elf_strptr(elf, shstrndx, h.sh_name);
  return name && strncmp(name, ".init", 5) != 0 && strncmp(name, ".fini", 5) != 0 &&
         strncmp(name, ".plt", 4) != 0;
}

static bool fn_crt_name(const char *name) {
  static const char *const crt[] = {"_start", "_init", "_fini", "frame_dummy",
                                    "register_tm_clones", "deregister_tm_clones",
                                    "__do_global_dtors_aux", "__libc_csu_init",
                                    "__libc_csu_fini", "_dl_relocate_static_pie"};
  for (size_t i = 0; i < sizeof crt / sizeof crt[0]; ++i)
    if (strcmp(name, crt[i]) == 0)
      return true;
  return false;
}

typedef struct fn_patch_pass {
  unsigned patched, refused, selected;
} fn_patch_pass_t;

/* The shown name of a function the filters select, NULL otherwise. */
static const char *fn_selected_name(const char *raw, uintptr_t func, size_t size, Elf *elf,
                                    size_t shndx, char *shown, size_t len) {
  size_t shstrndx;
  /* gcc's "f.cold" holds f's cold blocks, jumped to from f: no entry. */
  const char *cold = strstr(raw, ".cold");
  if (cold && (cold[5] == '\0' || cold[5] == '.'))
    return NULL;
  if (fn_crt_name(raw) || elf_getshdrstrndx(elf, &shstrndx) != 0 ||
      !fn_section_ok(elf, shstrndx, shndx) || func < fp.lo || func + size > fp.hi)
    return NULL;
  const char *name = fn_demangle(raw, shown, len);
  return fn_selected(name) ? name : NULL;
}

/* Compiler hooks: the program's selected functions, only counted. */
static void fn_count_selected(const char *raw, uintptr_t func, size_t size, Elf *elf,
                              size_t shndx, void *arg) {
  char shown[1024];
  if (fn_selected_name(raw, func, size, elf, shndx, shown, sizeof shown))
    ++((fn_patch_pass_t *)arg)->selected;
}

static void fn_select_one(const char *raw, uintptr_t func, size_t size, Elf *elf, size_t shndx,
                          void *arg) {
  fn_patch_pass_t *pass = arg;
  char shown[1024];
  const char *name = fn_selected_name(raw, func, size, elf, shndx, shown, sizeof shown);
  if (!name)
    return;
  ++pass->selected;
  uintptr_t at = func;
  if (size >= 4 && fn_is_endbr64((const uint8_t *)at))
    at += 4;
  bool nop = at + FN_PATCH_LEN <= func + size && fn_is_nop5((const uint8_t *)at);
  if (!nop && !fp.cs_open)
    return; /* cannot be moved without capstone */
  fn_func_t *f = fn_func_add(func, name);
  if (!f || !f->event)
    return;
  if (fp.ncands == fp.cands_cap) {
    size_t cap = fp.cands_cap ? 2 * fp.cands_cap : 256;
    fn_candidate_t *c = realloc(fp.cands, cap * sizeof *c);
    if (!c)
      return;
    fp.cands = c;
    fp.cands_cap = cap;
  }
  char *copy = strdup(name);
  if (copy)
    fp.cands[fp.ncands++] = (fn_candidate_t){func, at, size, f, copy, nop};
}

static int fn_candidate_order(const void *a, const void *b) {
  uintptr_t x = ((const fn_candidate_t *)a)->func, y = ((const fn_candidate_t *)b)->func;
  return x < y ? -1 : x > y;
}

/* The module's stubs are written, made executable, then its entries
 * jump to them: no code runs through a stub before that, ours included. */
static void fn_patch_candidates(fn_patch_pass_t *pass) {
  if (fp.ncands > 1)
    qsort(fp.cands, fp.ncands, sizeof *fp.cands, fn_candidate_order);
  size_t first_site = fp.nsites;
  for (size_t i = 0; i < fp.ncands; ++i) {
    const fn_candidate_t *c = &fp.cands[i];
    /* Aliases share an address: patched once. */
    if ((i > 0 && fp.cands[i - 1].func == c->func) || fp.stub_used + FN_STUB_SIZE > fp.stub_cap)
      continue;
    bool ok = c->nop ? fn_patch_nop(c->at, c->fn)
                     : fn_patch_entry(c->name, c->func, c->size, c->at, c->fn);
    ok ? ++pass->patched : ++pass->refused;
  }
  if (fp.stub_used)
    mprotect(fp.stubs, fp.stub_cap, PROT_READ | PROT_EXEC);
  for (size_t k = first_site; k < fp.nsites; ++k)
    if (!fn_text_write(fp.sites[k].at, fp.sites[k].jmp, FN_PATCH_LEN)) {
      fp.sites[k].at = 0; /* nothing to write back */
      --pass->patched, ++pass->refused;
    }
  for (size_t i = 0; i < fp.ncands; ++i)
    free(fp.cands[i].name);
  fp.ncands = 0;
}

/* The program's functions: its symbol table, or that of its debug file
 * when the program is stripped (libdw finds it), else its dynamic
 * symbols. */
static void fn_count_none(const char *raw, uintptr_t func, size_t size, Elf *elf, size_t shndx,
                          void *arg) {
  (void)raw, (void)func, (void)size, (void)elf, (void)shndx, (void)arg;
}

/* One module's selected functions; false: its symbols could not be read.
 * symtab: whether a full symbol table was found. */
static bool fn_patch_module(const fn_module_t *m, fn_patch_pass_t *pass, const char **module,
                            bool *symtab) {
  fp.lo = m->lo, fp.hi = m->hi;
  fp.stubs = NULL, fp.stub_used = fp.stub_cap = 0;
  int functions = fn_each_function(fp.lo, fn_count_none, NULL, module, symtab);
  if (functions <= 0)
    return functions == 0;
  if (!fn_stubs_map((size_t)functions)) {
    xpt_msg("xpti: functions: no room for stubs near %s; nothing of it patched",
            *module ? *module : "the program");
    return true;
  }
  fn_each_function(fp.lo, fn_select_one, pass, module, symtab);
  fn_patch_candidates(pass);
  if (!fp.stub_used)
    munmap(fp.stubs, fp.stub_cap);
  return true;
}

unsigned fn_patch_program(bool program_entries) {
  fn_modules_t *ms = calloc(1, sizeof *ms);
  if (!ms)
    return 0;
  fn_modules_list(ms);
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &fp.cs) == CS_ERR_OK) {
    cs_option(fp.cs, CS_OPT_DETAIL, CS_OPT_ON);
    fp.cs_open = true;
  }
  /* The program; with a regex, the libraries loaded with it too. */
  fn_patch_pass_t pass = {0, 0, 0}, in_program = {0, 0, 0};
  const char *what = "the program";
  bool readable = false, symtab = false;
  for (unsigned i = 0; i < ms->n; ++i) {
    if (i > 0 && (!fn_cfg.has_select || !ms->m[i].wanted))
      continue;
    const char *module = NULL;
    bool full = true;
    bool ok = (i == 0 && !program_entries) || fn_patch_module(&ms->m[i], &pass, &module, &full);
    if (i == 0 && !program_entries && fn_cfg.has_select) { /* hooks: counted, not patched */
      fp.lo = ms->m[0].lo, fp.hi = ms->m[0].hi;
      ok = fn_each_function(fp.lo, fn_count_selected, &pass, &module, &full) >= 0;
    }
    if (fn_cfg.has_select) { /* its calls into the C library */
      unsigned hooked = fn_got_hook(&ms->m[i]);
      pass.selected += hooked;
      pass.patched += hooked;
    }
    if (i == 0) {
      readable = ok;
      symtab = full;
      in_program = pass;
      if (module)
        what = module;
    }
  }
  free(ms);
  free(fp.cands);
  fp.cands = NULL, fp.cands_cap = 0;
  /* compiler hooks: only whether a regex selects anything is said */
  if (!program_entries && !fn_cfg.has_select)
    return pass.patched;
  bool all = program_entries && !fn_cfg.has_select; /* no filter: every function */
  unsigned left = fp.no_size + fp.too_short + fp.unmovable;
  if (!readable) {
    if (program_entries)
      xpt_msg("xpti: functions: cannot read the symbols of %s; nothing of it patched", what);
  } else if (all && in_program.patched == 0)
    xpt_msg("xpti: functions: no function of %s could be patched%s", what,
            symtab ? "" : " (it is stripped and no debug file was found: install its debug "
                          "symbols, e.g. the -dbgsym package, or set DEBUGINFOD_URLS)");
  else if (all) {
    if (!symtab)
      xpt_msg("xpti: functions: %s is stripped and no debug file was found: only its %u "
              "exported functions are traced (install its debug symbols, e.g. the -dbgsym "
              "package, or set DEBUGINFOD_URLS)",
              what, in_program.patched);
    if (left)
      xpt_msg("xpti: functions: %u functions of %s traced, %u left alone (%u with no size, "
              "%u shorter than 5 bytes, %u whose first instructions cannot be moved; "
              "--functions NAME says why)",
              in_program.patched, what, left, fp.no_size, fp.too_short, fp.unmovable);
  } else if (!symtab && pass.selected == 0 && fn_cfg.has_select)
    xpt_msg("xpti: functions: %s is stripped and no debug file was found: only exported "
            "functions can be traced (none matches '%s'; install its debug symbols, e.g. the "
            "-dbgsym package, or set DEBUGINFOD_URLS)",
            what, fn_cfg.select_text);
  else if (pass.selected == 0 && fn_cfg.has_select)
    xpt_msg("xpti: functions: no function of %s or its libraries matches '%s'", what,
            fn_cfg.select_text);
  return pass.patched;
}

void fn_unpatch_program(void) {
  /* Only while no other thread can be running the bytes. */
  if (!fp.nsites)
    return;
  int threads = 0;
  FILE *f = fopen("/proc/self/status", "re");
  char line[128];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "Threads: %d", &threads) == 1)
      break;
  if (f)
    fclose(f);
  if (threads != 1)
    return;
  for (size_t i = 0; i < fp.nsites; ++i)
    if (fp.sites[i].at)
      fn_text_write(fp.sites[i].at, fp.sites[i].saved, FN_PATCH_LEN);
  fp.nsites = 0;
}
