/* xptrace common — finding the one shared state of the process.
 *
 * Why not an exported symbol: collectors are dlopen'ed RTLD_LOCAL and
 * some have version scripts hiding everything, so ELF interposition
 * would not bind the copies together.  Instead each copy carries an ELF
 * note ("xptrace", type XPT_SHARED_VERSION) holding the offset from the
 * note to its own state; every copy walks the loaded objects in load
 * order (dl_iterate_phdr) and uses the first such note.  Load order only
 * grows at the end, so all copies agree, and nothing is exported. */
#include "xpt_shared.h"

#include <elf.h>
#include <link.h>
#include <string.h>

#define XPT_STR2(x) #x
#define XPT_STR(x) XPT_STR2(x)

__attribute__((visibility("hidden"), used)) xpt_shared_t xpt_shared_own = {
    .err_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

/* namesz 8 ("xptrace\0"), descsz 4, type, name, desc: own state - here.
 * The difference is resolved at link time: no relocation at load. */
__asm__(".pushsection .note.xptrace,\"a\",%note\n"
        ".balign 4\n"
        ".long 8\n"
        ".long 4\n"
        ".long " XPT_STR(XPT_SHARED_VERSION) "\n"
        ".asciz \"xptrace\"\n"
        ".balign 4\n"
        "1: .long xpt_shared_own - 1b\n"
        ".popsection\n");

static _Atomic(xpt_shared_t *) shared_found;

static int shared_scan(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  xpt_shared_t **out = data;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE)
      continue;
    const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
    const char *end = p + ph->p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)(const void *)p;
      const char *name = p + sizeof *n;
      const char *desc = name + ((n->n_namesz + 3u) & ~3u);
      const char *next = desc + ((n->n_descsz + 3u) & ~3u);
      if (next > end)
        break;
      if (n->n_type == XPT_SHARED_VERSION && n->n_namesz == 8 && n->n_descsz == 4 &&
          memcmp(name, "xptrace", 8) == 0) {
        int32_t offset;
        memcpy(&offset, desc, sizeof offset);
        *out = (xpt_shared_t *)(void *)((uintptr_t)desc + (uintptr_t)(intptr_t)offset);
        return 1;
      }
      p = next;
    }
  }
  return 0;
}

xpt_shared_t *xpt_shared(void) {
  xpt_shared_t *s = atomic_load_explicit(&shared_found, memory_order_acquire);
  if (s)
    return s;
  s = NULL;
  dl_iterate_phdr(shared_scan, &s);
  if (!s)
    s = &xpt_shared_own; /* no PT_NOTE (a linker that drops the note) */
  atomic_store_explicit(&shared_found, s, memory_order_release);
  return s;
}
