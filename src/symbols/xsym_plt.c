/* A stub of .plt, .plt.sec or .plt.got jumps through one GOT slot
 * (`jmp *disp32(%rip)`, after an endbr64 and a bnd prefix where built
 * so); the dynamic relocation of that slot (JUMP_SLOT, or GLOB_DAT for
 * .plt.got) names the function.  x86-64 only. */
#include "xsym_plt.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static Elf_Scn *plt_section(Elf *elf, GElf_Addr addr, GElf_Shdr *sh) {
  size_t shstrndx;
  if (elf_getshdrstrndx(elf, &shstrndx) != 0)
    return NULL;
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
    if (!gelf_getshdr(scn, sh) || sh->sh_type != SHT_PROGBITS || addr < sh->sh_addr ||
        addr - sh->sh_addr >= sh->sh_size)
      continue;
    const char *name = elf_strptr(elf, shstrndx, sh->sh_name);
    return name && strncmp(name, ".plt", 4) == 0 ? scn : NULL;
  }
  return NULL;
}

/* The GOT slot the stub at `stub` (`size` bytes of `code`) jumps through. */
static bool stub_slot(const uint8_t *code, size_t size, GElf_Addr stub, GElf_Addr *slot) {
  for (size_t i = 0; i + 6 <= size; ++i)
    if (code[i] == 0xff && code[i + 1] == 0x25) {
      int32_t disp = (int32_t)((uint32_t)code[i + 2] | (uint32_t)code[i + 3] << 8 |
                               (uint32_t)code[i + 4] << 16 | (uint32_t)code[i + 5] << 24);
      *slot = stub + i + 6 + (GElf_Addr)(int64_t)disp;
      return true;
    }
  return false;
}

/* The symbol relocated into `slot`, from the dynamic relocations. */
static const char *slot_symbol(Elf *elf, GElf_Addr slot) {
  for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize)
      continue;
    Elf_Data *d = elf_getdata(scn, NULL);
    Elf_Scn *symscn = elf_getscn(elf, sh.sh_link);
    GElf_Shdr symsh;
    Elf_Data *syms = symscn ? elf_getdata(symscn, NULL) : NULL;
    if (!d || !syms || !gelf_getshdr(symscn, &symsh))
      continue;
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Rela r;
      GElf_Sym sym;
      if (!gelf_getrela(d, (int)i, &r) || r.r_offset != slot)
        continue;
      unsigned type = GELF_R_TYPE(r.r_info);
      if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) ||
          !gelf_getsym(syms, (int)GELF_R_SYM(r.r_info), &sym))
        return NULL;
      const char *name = elf_strptr(elf, symsh.sh_link, sym.st_name);
      return name && *name ? name : NULL;
    }
  }
  return NULL;
}

bool xsym_plt_name(Elf *elf, GElf_Addr addr, char *buf, size_t len) {
  GElf_Ehdr eh;
  GElf_Shdr sh;
  if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64)
    return false;
  Elf_Scn *scn = plt_section(elf, addr, &sh);
  Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
  size_t entry = sh.sh_entsize >= 8 ? sh.sh_entsize : 16;
  if (!d || !d->d_buf || d->d_size < sh.sh_size)
    return false;
  size_t at = (size_t)(addr - sh.sh_addr) / entry * entry;
  GElf_Addr slot;
  const char *name;
  if (at + entry > sh.sh_size)
    return false;
  /* No named slot: the lazy binder's stub (.plt's first), "[plt]". */
  if (!stub_slot((const uint8_t *)d->d_buf + at, entry, sh.sh_addr + at, &slot) ||
      !(name = slot_symbol(elf, slot)))
    return (size_t)snprintf(buf, len, "[plt]") < len;
  return (size_t)snprintf(buf, len, "%s@plt", name) < len;
}
