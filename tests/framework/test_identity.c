/* One million distinct trace points never share a universal ID, the same
 * key always returns the same event, and memory follows trace points, not
 * visits. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "check.h"
#include "xpti/xpti_trace_framework.h"

#define NTP 1000000
#define NFILES 100

/* Pages this thread touched for the first time.  Not the process's RSS:
 * the framework's helper thread may be preparing memory for the tables
 * meanwhile, which is not the visits' doing. */
static long thread_page_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_minflt + ru.ru_majflt;
}

int main(void) {
  char files[NFILES][32];
  for (int f = 0; f < NFILES; f++)
    snprintf(files[f], sizeof files[f], "src/file_%d.c", f);
  uint64_t *uids = malloc(sizeof *uids * NTP);
  uint8_t *used = calloc(NTP + 1, 1);
  CHECK(uids && used);
  if (!uids || !used)
    return 1;
  /* keys differ in file, line or column only, with one function name:
   * the cases where a hash of the parts would be most tempted to collide */
  for (int i = 0; i < NTP; i++) {
    xpti_payload_t p = xpti_payload_make("fn", files[i % NFILES], (uint32_t)(i / NFILES / 100),
                                         (uint32_t)(i / NFILES % 100), NULL);
    uids[i] = xptiRegisterPayload(&p);
  }
  int dup = 0, bad = 0;
  for (int i = 0; i < NTP; i++) {
    if (uids[i] == 0 || uids[i] > NTP) {
      bad++;
      continue;
    }
    if (used[uids[i]]++)
      dup++;
  }
  CHECK_EQ(bad, 0);
  CHECK_EQ(dup, 0);
  /* the same keys again give the same IDs */
  for (int i = 0; i < NTP; i += 7) {
    xpti_payload_t p = xpti_payload_make("fn", files[i % NFILES], (uint32_t)(i / NFILES / 100),
                                         (uint32_t)(i / NFILES % 100), NULL);
    if (xptiRegisterPayload(&p) != uids[i])
      bad++;
  }
  CHECK_EQ(bad, 0);
  /* a million visits to existing points must not grow memory */
  long before = thread_page_faults();
  for (int i = 0; i < NTP; i++) {
    xpti_payload_t p = xpti_payload_make("fn", files[0], 0, 0, NULL);
    uint64_t inst;
    xptiMakeEvent("fn", &p, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, &inst);
    if (inst != (uint64_t)i + 1)
      bad++;
  }
  CHECK_EQ(bad, 0);
  long after = thread_page_faults();
  CHECK(after - before < 256); /* < 1 MiB for 1e6 visits */
  free(uids);
  free(used);
  return CHECK_DONE();
}
