/* The tables' memory (issue 12): a program that makes a few trace points
 * starts no helper thread; one that makes many gets the reserve's thread
 * ("xpti-reserve"), and every trace point and string made across pool
 * blocks, huge-page blocks and index growths reads back intact, in the
 * process and in a forked child (which has no reserve thread). */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "xpti/xpti_trace_framework.h"

/* Threads of this process, and whether one is named name. */
static int count_threads(const char *name, int *named) {
  DIR *d = opendir("/proc/self/task");
  if (!d)
    return -1;
  int n = 0;
  *named = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    n++;
    char path[300], comm[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "re");
    if (f) {
      if (fgets(comm, sizeof comm, f))
        comm[strcspn(comm, "\n")] = '\0';
      fclose(f);
    }
    if (strcmp(comm, name) == 0)
      (*named)++;
  }
  closedir(d);
  return n;
}

/* Makes trace points first..first+count-1 and returns their universal IDs. */
static void make(unsigned first, unsigned count, uint64_t *uids) {
  for (unsigned i = first; i < first + count; i++) {
    char name[64], file[64];
    snprintf(name, sizeof name, "pool_function_%u", i);
    snprintf(file, sizeof file, "src/pool/file_%u.c", i / 16);
    xpti_payload_t p = {0};
    p.name = name;
    p.source_file = file;
    p.line_no = i + 1;
    p.column_no = i % 80;
    uint64_t instance;
    xpti_trace_event_data_t *ev =
        xptiMakeEvent(name, &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &instance);
    CHECK(ev != NULL);
    uids[i] = ev ? ev->unique_id : 0;
  }
}

/* Every trace point by its ID, by its content again, and its strings. */
static void verify(unsigned count, const uint64_t *uids) {
  unsigned bad = 0;
  for (unsigned i = 0; i < count; i++) {
    char name[64], file[64];
    snprintf(name, sizeof name, "pool_function_%u", i);
    snprintf(file, sizeof file, "src/pool/file_%u.c", i / 16);
    const xpti_payload_t *p = xptiQueryPayloadByUID(uids[i]);
    if (!p || !p->name || strcmp(p->name, name) != 0 || !p->source_file ||
        strcmp(p->source_file, file) != 0 || p->line_no != i + 1 || p->column_no != i % 80 ||
        xptiLookupString((uint32_t)(p->uid.p1 & 0xffffffffu)) != p->name) {
      bad++;
      continue;
    }
    xpti_payload_t again = {0};
    again.name = name;
    again.source_file = file;
    again.line_no = i + 1;
    again.column_no = i % 80;
    if (xptiRegisterPayload(&again) != uids[i])
      bad++;
  }
  CHECK_EQ(bad, 0);
}

#define FEW 100
#define MANY 200000u

int main(void) {
  static uint64_t uids[MANY + MANY / 4];
  xptiForceSetTraceEnabled(true);
  int reserve = -1;
  int before = count_threads("xpti-reserve", &reserve);
  make(0, FEW, uids);
  verify(FEW, uids);
  int after = count_threads("xpti-reserve", &reserve);
  CHECK_EQ(after, before);
  CHECK_EQ(reserve, 0);

  make(FEW, MANY - FEW, uids);
  verify(MANY, uids);
  count_threads("xpti-reserve", &reserve);
  CHECK_EQ(reserve, 1);

  pid_t child = fork();
  if (child == 0) { /* no reserve thread here: the child makes its own memory */
    make(MANY, MANY / 4, uids);
    verify(MANY + MANY / 4, uids);
    int none = -1;
    count_threads("xpti-reserve", &none);
    CHECK_EQ(none, 0);
    _exit(CHECK_DONE());
  }
  CHECK(child > 0);
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  verify(MANY, uids); /* the parent's own, untouched by the child's */
  return CHECK_DONE();
}
