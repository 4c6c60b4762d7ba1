/* xptrace merge DIR|TRACE... [-o OUT]: one trace from any set of output
 * folders and traces (src/trace/pt_merge.c does the work).  Also what
 * `xptrace run` calls at the end of a run for its own processes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "progress.h"
#include "pt_merge.h"
#include "xpt_clock_correct.h"
#include "xpt_files.h"
#include "options.h"
#include "xptrace_cmds.h"

/* The one table of merge's options: the parser's, --help's, avail's and
 * docs/merge.md's (`xptrace avail --markdown merge`). */
static const struct xopt merge_opts[] = {
    {"output", 'o', required_argument, "FILE",
     "the merged trace; a name that is taken gets -1, -2, ... (nothing is replaced)",
     "the merged trace; a name that is taken gets `-1`, `-2`, ... (nothing is replaced)",
     "`DIR/trace.perfetto-trace` for one folder, else `./merged.perfetto-trace`"},
    {"quiet", 'q', no_argument, NULL, "no summary line", NULL, "off"},
    {"help", 'h', no_argument, NULL, "this help", NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL, NULL},
};

const struct xopt_cmd xopt_merge = {
    "merge",
    "usage: xptrace merge [-o OUT] DIR|TRACE...\n"
    "One Perfetto trace from output folders and traces: every process a named\n"
    "process track, sequence ids, track uuids, flow ids and clashing pids remapped.\n"
    "A folder gives every *.perfetto-trace under it, except merged traces\n"
    "(trace*, merged*) lying at its top when its subfolders hold traces.\n",
    merge_opts,
    "Exit status: 0 merged; 1 an input was unreadable or corrupt (the rest is\n"
    "merged), nothing to merge, or the output could not be written; 2 bad usage.\n"};
static char usage_merge[4096]; /* xopt_usage's, made first thing */

#define SUFFIX ".perfetto-trace"
#define MAX_DEPTH 16

struct inputs {
  struct pt_merge_input *v;
  size_t n, cap;
  const char *skip; /* the output itself (absolute) */
};

static bool has_suffix(const char *name) {
  size_t n = strlen(name), k = strlen(SUFFIX);
  return n > k && strcmp(name + n - k, SUFFIX) == 0;
}

static int add_input(struct inputs *in, const char *path, unsigned arg, bool joins) {
  char real[PATH_MAX];
  if (in->skip && realpath(path, real) && strcmp(real, in->skip) == 0)
    return 0;
  if (in->n == in->cap) {
    size_t cap = in->cap ? in->cap * 2 : 64;
    struct pt_merge_input *v = realloc(in->v, cap * sizeof *v);
    if (!v)
      return -1;
    in->v = v;
    in->cap = cap;
  }
  char *p = strdup(path), *g = strdup(path);
  if (!p || !g) {
    free(p);
    free(g);
    return -1;
  }
  char *slash = strrchr(g, '/');
  if (slash)
    *slash = '\0';
  else
    strcpy(g, ".");
  in->v[in->n++] = (struct pt_merge_input){p, g, arg, joins};
  return 0;
}

/* Traces under dir (depth: 0 = the folder given).  Names starting with
 * '.' (a finisher's temporary file) and symbolic links are skipped. */
static int walk(struct inputs *in, const char *dir, int depth, unsigned arg, bool *deeper) {
  DIR *d = opendir(dir);
  if (!d)
    return depth == 0 ? -2 : 0;
  struct dirent *e;
  int rc = 0;
  while (rc == 0 && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
      continue;
    struct stat st;
    if (lstat(path, &st) != 0)
      continue;
    if (S_ISDIR(st.st_mode) && depth < MAX_DEPTH) {
      rc = walk(in, path, depth + 1, arg, deeper);
    } else if (S_ISREG(st.st_mode) && has_suffix(e->d_name)) {
      if (depth > 0)
        *deeper = true;
      rc = add_input(in, path, arg, false);
    }
  }
  closedir(d);
  return rc;
}

static int strcmp_ptr(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_input(const void *a, const void *b) {
  const struct pt_merge_input *x = a, *y = b;
  if (x->joins != y->joins)
    return x->joins ? 1 : -1; /* after the traces of their processes */
  int c = strcmp(x->group, y->group);
  if (c)
    return c;
  /* trace, trace.1, trace.2 ... (the images of an exec'd process) in order */
  size_t la = strlen(x->path), lb = strlen(y->path);
  return la != lb ? (la < lb ? -1 : 1) : strcmp(x->path, y->path);
}

/* A folder's traces: its top-level trace* and merged* are merged outputs
 * when any other trace is there (in its subfolders: the processes; at its
 * top: a run's samples and counters, merged with nothing below). */
static int add_dir(struct inputs *in, const char *dir, unsigned arg) {
  size_t first = in->n;
  bool deeper = false;
  int rc = walk(in, dir, 0, arg, &deeper);
  if (rc)
    return rc;
  bool others = deeper; /* traces merged outputs were made of */
  for (size_t i = first; i < in->n && !others; i++) {
    const char *base = strrchr(in->v[i].path, '/');
    base = base ? base + 1 : in->v[i].path;
    others = strncmp(base, "trace", 5) && strncmp(base, "merged", 6);
  }
  if (others) {
    size_t k = first;
    for (size_t i = first; i < in->n; i++) {
      const char *base = strrchr(in->v[i].path, '/');
      base = base ? base + 1 : in->v[i].path;
      bool merged = !strncmp(base, "trace", 5) || !strncmp(base, "merged", 6);
      bool top = merged && strcmp(in->v[i].group, dir) == 0;
      if (top) {
        free((char *)in->v[i].path);
        free((char *)in->v[i].group);
      } else {
        /* another trace at the top (the run's samples trace) describes
         * the processes of the subfolders: it joins them */
        in->v[i].joins = deeper && strcmp(in->v[i].group, dir) == 0;
        in->v[k++] = in->v[i];
      }
    }
    in->n = k;
  }
  return 0;
}

static void inputs_free(struct inputs *in) {
  for (size_t i = 0; i < in->n; i++) {
    free((char *)in->v[i].path);
    free((char *)in->v[i].group);
  }
  free(in->v);
}

static void merge_warn(void *ctx, const char *line) {
  (void)ctx;
  progress_clear();
  fprintf(stderr, "xptrace: merge: %s\n", line);
}

/* MPI ranks (docs/mpi.md): a process folder holding one mpi-clock file
 * gets its timestamps mapped to rank 0's clock. */
struct clock_map {
  struct xpt_clock_fit fit;
  struct clock_map *next;
};

static uint64_t clock_apply(const void *ctx, uint64_t ns) { return xpt_clock_correct(ctx, ns); }

struct merge_ctx {
  struct clock_map *maps;
  const struct inputs *in;
  const uint64_t *sizes; /* of in->v[i], for the progress line */
};

static void merge_time_map(void *ctx, const char *group, pt_time_fn *fn, const void **fn_ctx) {
  struct merge_ctx *mc = ctx;
  struct clock_map **maps = &mc->maps;
  if (mc->sizes) { /* a group starts: the inputs before it are merged */
    uint64_t done = 0;
    for (size_t i = 0; i < mc->in->n && strcmp(mc->in->v[i].group, group); i++)
      done += mc->sizes[i];
    progress_set(done);
  }
  *fn = NULL;
  DIR *d = opendir(group);
  if (!d)
    return;
  char found[NAME_MAX + 1] = "";
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strncmp(e->d_name, XPT_CLOCK_FILE_PREFIX, strlen(XPT_CLOCK_FILE_PREFIX)) == 0 && ++n == 1)
      snprintf(found, sizeof found, "%s", e->d_name);
  closedir(d);
  char path[PATH_MAX + NAME_MAX + 2];
  struct xpt_mpi_clock clock;
  struct clock_map *m;
  if (n != 1 || snprintf(path, sizeof path, "%s/%s", group, found) >= (int)sizeof path ||
      xpt_mpi_clock_read(path, &clock) != 0 || clock.fit.n == 0 ||
      (m = malloc(sizeof *m)) == NULL)
    return; /* no rank, or several processes in one folder: as recorded */
  m->fit = clock.fit;
  m->next = *maps;
  *maps = m;
  *fn = clock_apply;
  *fn_ctx = &m->fit;
}

/* Write the merged trace of `in` to `out` (a new file: a taken name gets
 * -1, -2...; written to a temporary name, then linked).  `path` gets
 * the name used.  Returns the exit status. */
static int merge_to(struct inputs *in, const char *out, char *path, size_t len,
                    struct pt_merge_stats *st) {
  qsort(in->v, in->n, sizeof *in->v, cmp_input);
  char dir[PATH_MAX], name[NAME_MAX + 1];
  const char *slash = strrchr(out, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) : 1, slash ? out : ".");
  if (slash == out)
    snprintf(dir, sizeof dir, "/");
  snprintf(name, sizeof name, "%.*s", NAME_MAX, slash ? slash + 1 : out);
  if (!name[0]) {
    fprintf(stderr, "xptrace: merge: '%s' names a folder, not a file\n", out);
    return 1;
  }
  char tmp[NAME_MAX + 64];
  snprintf(tmp, sizeof tmp, ".%.200s.tmp-%d", name, (int)getpid());
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int fd = dfd < 0 ? -1 : openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    fprintf(stderr, "xptrace: merge: cannot create a file in %s: %s\n", dir, strerror(errno));
    if (dfd >= 0)
      close(dfd);
    return 1;
  }
  uint64_t *sizes = calloc(in->n ? in->n : 1, sizeof *sizes), total = 0;
  for (size_t i = 0; sizes && i < in->n; i++) {
    struct stat st_in;
    sizes[i] = stat(in->v[i].path, &st_in) == 0 ? (uint64_t)st_in.st_size : 0;
    total += sizes[i];
  }
  struct merge_ctx mc = {NULL, in, sizes};
  struct pt_merge_opts o = {.warn = merge_warn, .time_map = merge_time_map, .ctx = &mc};
  char what[128];
  snprintf(what, sizeof what, "xptrace merge: %zu trace(s)", in->n);
  progress_begin(what, sizes ? total : 0);
  int rc = pt_merge(in->v, in->n, fd, &o, st);
  progress_end();
  free(sizes);
  while (mc.maps) {
    struct clock_map *next = mc.maps->next;
    free(mc.maps);
    mc.maps = next;
  }
  if (rc >= 0 && fsync(fd) != 0 && errno != EINVAL) {
    fprintf(stderr, "xptrace: merge: cannot write %s/%s: %s\n", dir, tmp, strerror(errno));
    rc = -1;
  }
  close(fd);
  int status = rc < 0 ? 1 : rc;
  if (rc >= 0) {
    /* the wanted name, else stem-N.ext */
    char got[NAME_MAX + 1];
    const char *dot = strstr(name, SUFFIX);
    if (!dot || dot[strlen(SUFFIX)] != '\0')
      dot = strrchr(name, '.');
    size_t stem = dot && dot != name ? (size_t)(dot - name) : strlen(name);
    bool linked = false;
    for (int i = 0; i < 1000 && !linked; i++) {
      if (i == 0)
        snprintf(got, sizeof got, "%s", name);
      else
        snprintf(got, sizeof got, "%.*s-%d%.*s", (int)(stem < 200 ? stem : 200), name, i, 32,
                 name + stem);
      if (linkat(dfd, tmp, dfd, got, 0) == 0)
        linked = true;
      else if (errno != EEXIST)
        break;
    }
    if (!linked) {
      fprintf(stderr, "xptrace: merge: cannot name the merged trace %s/%s: %s\n", dir, name,
              strerror(errno));
      status = 1;
    } else {
      snprintf(path, len, "%.*s/%.*s", PATH_MAX - 1, strcmp(dir, "/") ? dir : "", NAME_MAX, got);
    }
  }
  unlinkat(dfd, tmp, 0);
  close(dfd);
  return status;
}

int cmd_merge(int argc, char **argv) {
  xopt_usage(&xopt_merge, usage_merge, sizeof usage_merge);
  struct option longopts[8];
  char shorts[16];
  xopt_getopt(&xopt_merge, longopts, 8, ":", shorts, sizeof shorts);
  const char *output = NULL;
  bool quiet = false;
  opterr = 0;
  optind = 1;
  int opt;
  while ((opt = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
    switch (opt) {
    case 'o': output = optarg; break;
    case 'q': quiet = true; break;
    case 'h': fputs(usage_merge, stdout); return 0;
    case ':': return usage_error(usage_merge, "option '%s' needs a value", argv[optind - 1]);
    default: {
      const char *names[64];
      option_names(longopts, names, 64);
      return unknown_option(usage_merge, names, argv[optind - 1]);
    }
    }
  }
  if (optind >= argc)
    return usage_error(usage_merge, "no folder or trace given");
  if (output && !*output)
    return usage_error(usage_merge, "empty output name");
  char out[PATH_MAX];
  if (output) {
    snprintf(out, sizeof out, "%s", output);
  } else {
    struct stat st;
    bool one_dir = argc - optind == 1 && stat(argv[optind], &st) == 0 && S_ISDIR(st.st_mode);
    snprintf(out, sizeof out, "%s/%s", one_dir ? argv[optind] : ".",
             one_dir ? "trace" SUFFIX : "merged" SUFFIX);
  }
  char out_real[PATH_MAX] = "";
  struct inputs in = {0};
  /* The output's folder resolved: a default output inside a folder given
   * is never read back as an input (it does not exist yet anyway). */
  if (realpath(out, out_real))
    in.skip = out_real;
  int status = 0;
  for (int i = optind; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "xptrace: merge: cannot read %s: %s\n", argv[i], strerror(errno));
      status = 1;
      continue;
    }
    size_t before = in.n;
    int rc = S_ISDIR(st.st_mode) ? add_dir(&in, argv[i], (unsigned)(i - optind))
                                 : add_input(&in, argv[i], (unsigned)(i - optind), false);
    if (rc == -1) {
      fprintf(stderr, "xptrace: merge: out of memory\n");
      inputs_free(&in);
      return 1;
    }
    if (rc == -2) {
      fprintf(stderr, "xptrace: merge: cannot read folder %s: %s\n", argv[i], strerror(errno));
      status = 1;
    } else if (in.n == before) {
      fprintf(stderr, "xptrace: merge: no trace (*%s) in %s\n", SUFFIX, argv[i]);
      status = 1;
    }
  }
  if (in.n == 0) {
    if (status == 0)
      fprintf(stderr, "xptrace: merge: nothing to merge\n");
    inputs_free(&in);
    return 1;
  }
  char path[PATH_MAX + NAME_MAX + 8] = "";
  struct pt_merge_stats st = {0};
  int rc = merge_to(&in, out, path, sizeof path, &st);
  if (rc != 1 || st.packets) {
    if (!quiet && path[0])
      fprintf(stderr,
              "xptrace: merged %u trace%s (%u process%s, %llu packets) into %s\n", st.inputs,
              st.inputs == 1 ? "" : "s", st.processes, st.processes == 1 ? "" : "es",
              (unsigned long long)st.packets, path);
  }
  inputs_free(&in);
  return rc ? rc : status;
}

/* ---- the end of `xptrace run` --------------------------------------------- */
/* Whether folder `leaf` is of the session `token` (its xptrace.session). */
static bool of_session(const char *leaf, const char *token) {
  char path[PATH_MAX + 32], line[256];
  snprintf(path, sizeof path, "%s/xptrace.session", leaf);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, line, sizeof line - 1);
  close(fd);
  if (n <= 0)
    return false;
  line[n] = '\0';
  line[strcspn(line, "\n")] = '\0';
  return strcmp(line, token) == 0;
}

size_t xptrace_session_dirs(const char *dir, const char *token, char ***out) {
  *out = NULL;
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char leaf[PATH_MAX];
    struct stat st;
    if (snprintf(leaf, sizeof leaf, "%s/%s", dir, e->d_name) >= (int)sizeof leaf ||
        lstat(leaf, &st) != 0 || !S_ISDIR(st.st_mode) || !of_session(leaf, token))
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      char **v = realloc(*out, cap * sizeof *v);
      if (!v)
        break;
      *out = v;
    }
    if (((*out)[n] = strdup(leaf)) != NULL)
      n++;
  }
  closedir(d);
  if (n > 1)
    qsort(*out, n, sizeof **out, strcmp_ptr);
  return n;
}

int xptrace_merge_session(const char *dir, char **leaves, size_t n, const char *samples,
                          char *path, size_t len, unsigned *processes) {
  struct inputs in = {0};
  path[0] = '\0';
  *processes = 0;
  for (size_t i = 0; i < n; i++) {
    bool deeper = false;
    if (walk(&in, leaves[i], 1, 0, &deeper) == -1) {
      inputs_free(&in);
      return 1;
    }
  }
  if (samples && samples[0] && add_input(&in, samples, 0, true) != 0) {
    inputs_free(&in);
    return 1;
  }
  if (in.n == 0)
    return 1;
  char out[PATH_MAX + 32];
  snprintf(out, sizeof out, "%s/trace" SUFFIX, dir);
  /* One process, nothing to join: its trace is the run's, under a second
   * name (a hard link), not a second copy on the disk. */
  if (in.n == 1 && !in.v[0].joins && link(in.v[0].path, out) == 0) {
    snprintf(path, len, "%s", out);
    *processes = 1;
    inputs_free(&in);
    return 0;
  }
  struct pt_merge_stats st = {0};
  int rc = merge_to(&in, out, path, len, &st);
  *processes = st.processes;
  inputs_free(&in);
  return rc;
}
