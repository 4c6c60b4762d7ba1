/* The text collector's line format (docs/text.md), checked line by line.
 * Linked with libxptifw.so directly; CTest sets XPTI_SUBSCRIBERS to the
 * collector and XPTI_TEXT_OUTPUT to the file read back here. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <xpti/xpti_trace_framework.h>
#include <xptrace/xptrace_protocol.h>

static int failures;
static char *output;   /* the whole output file */
static char prefix[64]; /* " <pid>:<tid> " of this thread */

#define CHECK(cond)                                                                             \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                  \
      failures++;                                                                               \
    }                                                                                           \
  } while (0)

static void load_output(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    exit(1);
  }
  size_t cap = 1 << 16, len = 0;
  output = malloc(cap);
  size_t n;
  while ((n = fread(output + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len < 4096)
      output = realloc(output, cap *= 2);
  }
  output[len] = 0;
  fclose(f);
}

/* How many lines are exactly "<timestamp><who><body>". */
static int count_lines(const char *who, const char *body) {
  int count = 0;
  size_t wlen = strlen(who), blen = strlen(body);
  for (char *line = output; *line;) {
    char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    char *p = line;
    while (p < line + len && *p >= '0' && *p <= '9')
      p++;
    if (p > line && (size_t)(line + len - p) == wlen + blen && memcmp(p, who, wlen) == 0 &&
        memcmp(p + wlen, body, blen) == 0)
      count++;
    line = end ? end + 1 : line + len;
  }
  return count;
}

/* The line "<timestamp><prefix><body>" must appear exactly once. */
__attribute__((format(printf, 1, 2))) static void expect(const char *fmt, ...) {
  char body[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  int n = count_lines(prefix, body);
  if (n != 1) {
    fprintf(stderr, "expected once (found %d): %s%s\n", n, prefix, body);
    failures++;
  }
}

static void add(xpti_trace_event_data_t *ev, const char *key, const void *data, size_t size,
                uint8_t type) {
  CHECK(xptiAddMetadata(ev, key, xptiRegisterObject(data, size, type)) == XPTI_RESULT_SUCCESS);
}

int main(void) {
  const char *out = getenv("XPTI_TEXT_OUTPUT");
  if (!out) {
    fprintf(stderr, "XPTI_TEXT_OUTPUT must be set\n");
    return 1;
  }
  snprintf(prefix, sizeof prefix, " %d:%d ", (int)getpid(), (int)syscall(SYS_gettid));
  CHECK(xptiTraceEnabled());
  CHECK(xptiInitialize("fmt", 2, 5, "2.5.0") == XPTI_RESULT_SUCCESS);
  CHECK(xptiInitialize("odd name", 1, 0, NULL) == XPTI_RESULT_SUCCESS);
  uint8_t s = xptiRegisterStream("fmt");
  /* a stream initialised twice: two init lines, one line per notification */
  CHECK(xptiInitialize("again", 1, 0, "1") == XPTI_RESULT_SUCCESS);
  CHECK(xptiInitialize("again", 1, 0, "1") == XPTI_RESULT_SUCCESS);

  /* every metadata type */
  xpti_payload_t p = xpti_payload_make("all \"types\"", "dir/fmt file.c", 7, 3, NULL);
  uint64_t inst;
  xpti_trace_event_data_t *ev = xptiMakeEvent(NULL, &p, XPTI_EVENT_ALGORITHM,
                                              XPTI_ACTIVITY_ACTIVE, &inst);
  CHECK(ev != NULL);
  int8_t i8 = -8;
  int16_t i16 = -1600;
  int32_t i32 = -320000;
  int64_t i64 = -6400000000;
  uint8_t u8 = 200;
  uint16_t u16 = 60000;
  uint32_t u32 = 4000000000u;
  uint64_t u64 = UINT64_MAX;
  float f32 = 1.5f;
  double f64 = 0.1;
  bool yes = true, no = false;
  const char bin[] = {(char)0xde, (char)0xad, 0, (char)0xff};
  const char odd3[] = {1, 2, 3};
  add(ev, "str", "a \"q\"\\\n\tz", 10, XPTI_METADATA_STRING);
  add(ev, "unterminated", "abc", 3, XPTI_METADATA_STRING);
  add(ev, "i8", &i8, 1, XPTI_METADATA_SIGNED_INTEGER);
  add(ev, "i16", &i16, 2, XPTI_METADATA_SIGNED_INTEGER);
  add(ev, "i32", &i32, 4, XPTI_METADATA_SIGNED_INTEGER);
  add(ev, "i64", &i64, 8, XPTI_METADATA_SIGNED_INTEGER);
  add(ev, "u8", &u8, 1, XPTI_METADATA_UNSIGNED_INTEGER);
  add(ev, "u16", &u16, 2, XPTI_METADATA_UNSIGNED_INTEGER);
  add(ev, "u32", &u32, 4, XPTI_METADATA_UNSIGNED_INTEGER);
  add(ev, "u64", &u64, 8, XPTI_METADATA_UNSIGNED_INTEGER);
  add(ev, "f32", &f32, sizeof f32, XPTI_METADATA_FLOAT);
  add(ev, "f64", &f64, sizeof f64, XPTI_METADATA_FLOAT);
  add(ev, "yes", &yes, sizeof yes, XPTI_METADATA_BOOLEAN);
  add(ev, "no", &no, sizeof no, XPTI_METADATA_BOOLEAN);
  add(ev, "bin", bin, sizeof bin, XPTI_METADATA_BINARY);
  add(ev, "odd size", odd3, sizeof odd3, XPTI_METADATA_SIGNED_INTEGER);
  add(ev, "odd type", odd3, sizeof odd3, 9);
  CHECK(xptiNotifySubscribers(s, XPTI_TRACE_TASK_BEGIN, NULL, ev, inst, NULL) ==
        XPTI_RESULT_SUCCESS);

  /* no name, no file: a code pointer only; then a parent and an edge */
  xpti_payload_t anon = xpti_payload_make(NULL, NULL, XPTI_INVALID_LINE, XPTI_INVALID_LINE,
                                          (const void *)main);
  xpti_trace_event_data_t *aev =
      xptiMakeEvent(NULL, &anon, XPTI_EVENT_ALGORITHM, XPTI_ACTIVITY_ACTIVE, NULL);
  CHECK(aev != NULL);
  aev->source_id = 11;
  aev->target_id = 12;
  CHECK(xptiNotifySubscribers(s, XPTI_TRACE_EDGE_CREATE, ev, aev, 42, NULL) ==
        XPTI_RESULT_SUCCESS);
  /* an event-less notification (allowed with user data) */
  CHECK(xptiNotifySubscribers(s, XPTI_TRACE_FUNCTION_BEGIN, NULL, NULL, 3, "user data") ==
        XPTI_RESULT_SUCCESS);
  /* an xptrace timed slice: the work's times and track are printed */
  xptrace_timed_slice_t slice = {1000, 3500, 7, "queue \"7\"", NULL};
  CHECK(xptiNotifySubscribers(
            s, xptiRegisterUserDefinedTracePoint(XPTRACE_TOOL_NAME, XPTRACE_TIMED_SLICE_ID), NULL,
            aev, 5, &slice) == XPTI_RESULT_SUCCESS);

  /* user-defined types of tools registered after xptiInitialize: each
   * notified at once, then many registered before any of them notifies */
  char tool[16];
  for (int t = 0; t < 20; t++) {
    snprintf(tool, sizeof tool, "tool %d", t);
    uint16_t type = xptiRegisterUserDefinedTracePoint(tool, XPTI_TRACE_POINT_END(3));
    CHECK(type != 0);
    CHECK(xptiNotifySubscribers(s, type, NULL, aev, (uint64_t)t, NULL) == XPTI_RESULT_SUCCESS);
  }
  uint16_t late[40];
  for (int t = 0; t < 40; t++) {
    snprintf(tool, sizeof tool, "late%d", t);
    late[t] = xptiRegisterUserDefinedTracePoint(tool, XPTI_TRACE_POINT_BEGIN(t + 10));
    CHECK(late[t] != 0);
  }
  for (int t = 39; t >= 0; t--)
    CHECK(xptiNotifySubscribers(s, late[t], NULL, aev, (uint64_t)t, NULL) == XPTI_RESULT_SUCCESS);
  /* a type that is neither predefined nor a tool's */
  CHECK(xptiNotifySubscribers(s, XPTI_TRACE_POINT_BEGIN(15), NULL, aev, 5, NULL) ==
        XPTI_RESULT_SUCCESS);

  CHECK(xptiNotifySubscribers(xptiRegisterStream("again"), XPTI_TRACE_SIGNAL, NULL, aev, 7,
                              NULL) == XPTI_RESULT_SUCCESS);

  /* a line longer than the limit is cut, not dropped */
  static char big[6000];
  memset(big, 'x', sizeof big - 1);
  xpti_payload_t bp = xpti_payload_make("big", "fmt.c", 9, 0, NULL);
  xpti_trace_event_data_t *bev = xptiMakeEvent(NULL, &bp, XPTI_EVENT_ALGORITHM,
                                               XPTI_ACTIVITY_ACTIVE, NULL);
  add(bev, "big", big, sizeof big, XPTI_METADATA_STRING);
  CHECK(xptiNotifySubscribers(s, XPTI_TRACE_SIGNAL, NULL, bev, 1, NULL) == XPTI_RESULT_SUCCESS);

  /* a forked child goes on writing to the same file under its own pid */
  pid_t child = fork();
  if (child == 0) {
    xptiNotifySubscribers(s, XPTI_TRACE_BARRIER_BEGIN, NULL, aev, 99, NULL);
    _exit(0);
  }
  int status;
  CHECK(child > 0 && waitpid(child, &status, 0) == child && WIFEXITED(status));
  xptiFinalize("fmt");
  xptiFinalize("odd name");

  load_output(out);
  uint64_t uid = ev->unique_id, auid = aev->unique_id;
  /* Intel's default stream, initialised before the first stream and
   * finished after the first stream finalised */
  expect("xpti.framework xptiTraceInit major=1 minor=0 version=\"1.0.0\"");
  CHECK(strstr(output, "xpti.framework xptiTraceInit") < strstr(output, "fmt xptiTraceInit"));
  expect("xpti.framework xptiTraceFinish");
  CHECK(strstr(output, "fmt xptiTraceFinish") < strstr(output, "xpti.framework xptiTraceFinish"));
  CHECK(strstr(output, "xpti.framework xptiTraceFinish") <
        strstr(output, "odd\\x20name xptiTraceFinish"));
  expect("fmt xptiTraceInit major=2 minor=5 version=\"2.5.0\"");
  expect("odd\\x20name xptiTraceInit major=1 minor=0 version=<null>");
  expect("fmt task_begin \"all \\\"types\\\"\" uid=%" PRIu64 " instance=%" PRIu64 " src=dir/fmt\\x20file.c:7 | "
         "str=\"a \\\"q\\\"\\\\\\n\\tz\" unterminated=\"abc\" i8=-8 i16=-1600 i32=-320000 "
         "i64=-6400000000 u8=200 u16=60000 u32=4000000000 u64=18446744073709551615 f32=1.5 "
         "f64=0.1 yes=true no=false bin=hex:dead00ff odd\\x20size=hex:010203 "
         "odd\\x20type=hex:010203",
         uid, inst);
  expect("fmt edge_create <unnamed> uid=%" PRIu64 " instance=42 src=- source=11 target=12 "
         "parent=%" PRIu64, auid, uid);
  expect("fmt function_begin \"user data\" uid=0 instance=3 src=-"); /* the name user data carries */
  expect("fmt xptrace:user0_begin <unnamed> uid=%" PRIu64 " instance=5 src=- source=11 target=12 "
         "ran=1000..3500 (2500 ns) track=\"queue \\\"7\\\"\"", auid);
  for (int t = 0; t < 20; t++)
    expect("fmt tool\\x20%d:user3_end <unnamed> uid=%" PRIu64 " instance=%d src=- source=11 "
           "target=12", t, auid, t);
  for (int t = 0; t < 40; t++)
    expect("fmt late%d:user%d_begin <unnamed> uid=%" PRIu64 " instance=%d src=- source=11 "
           "target=12", t, t + 10, auid, t);
  expect("fmt type30 <unnamed> uid=%" PRIu64 " instance=5 src=- source=11 target=12", auid);
  CHECK(count_lines(prefix, "again xptiTraceInit major=1 minor=0 version=\"1\"") == 2);
  expect("again signal <unnamed> uid=%" PRIu64 " instance=7 src=- source=11 target=12", auid);
  expect("fmt xptiTraceFinish");
  expect("odd\\x20name xptiTraceFinish");

  /* the long line: cut at 4096 bytes with a mark */
  char *big_line = strstr(output, " fmt signal \"big\"");
  CHECK(big_line != NULL);
  if (big_line) {
    char *start = big_line;
    while (start > output && start[-1] != '\n')
      start--;
    char *end = strchr(big_line, '\n');
    CHECK(end && end - start + 1 == 4096);
    CHECK(end && memcmp(end - 15, " ...[truncated]", 15) == 0);
  }

  /* the child's line carries the child's pid (and its only thread's id) */
  snprintf(prefix, sizeof prefix, " %d:%d ", (int)child, (int)child);
  expect("fmt barrier_begin <unnamed> uid=%" PRIu64 " instance=99 src=- source=11 target=12",
         auid);

  /* nothing else: 4 inits + 3 + timed + 20 + 40 + 1 + again + big + child + 2 finishes
   * ("again" is never finalised) + xpti.framework's init and finish */
  int lines = 0;
  for (char *c = output; *c; c++)
    lines += *c == '\n';
  CHECK(lines == 76);
  if (failures)
    fprintf(stderr, "---- output ----\n%s", output);
  return failures ? 1 : 0;
}
