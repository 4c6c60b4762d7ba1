/* `mpirun ... xptrace run --mpi -- app`: one xptrace per rank.  The ranks
 * of a job share one output folder (named after the job id), each says
 * one line, and the last to end names the one merge of the whole job
 * (Perfetto traces; JSON ones are not merged). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xptrace_cmds.h"

#define DONE_PREFIX ".xptrace-rank-"

static const char *first_env(const char *const *vars, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v)
      return v;
  }
  return NULL;
}

const char *run_mpi_rank(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
  return first_env(vars, sizeof vars / sizeof *vars);
}

/* The job's size (0: unknown). */
static long run_mpi_size(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
  const char *v = first_env(vars, sizeof vars / sizeof *vars);
  char *end;
  long n = v ? strtol(v, &end, 10) : 0;
  return v && *end == '\0' && n > 0 ? n : 0;
}

bool run_mpi_job_dir(const char *command0, char *buf, size_t len) {
  static const char *const vars[] = {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"};
  const char *job = first_env(vars, sizeof vars / sizeof *vars);
  if (!run_mpi_rank() || !job)
    return false; /* each rank its own folder, as any run */
  char id[64];
  size_t k = 0;
  for (const char *p = job; *p && k + 1 < sizeof id; p++)
    id[k++] = isalnum((unsigned char)*p) ? *p : '-';
  id[k] = '\0';
  const char *base = strrchr(command0, '/');
  return (size_t)snprintf(buf, len, "xptrace-%s-job%s", base ? base + 1 : command0, id) < len;
}

void run_mpi_rank_done(const char *dir, const char *rank, const char *trace, const char *stats,
                       bool mergeable) {
  long size = run_mpi_size();
  char of[32] = "";
  if (size)
    snprintf(of, sizeof of, " of %ld", size);
  fprintf(stderr, "xptrace: rank %s%s: %s%s%s%s\n", rank, of, trace ? "trace " : "",
          trace ? trace : "", trace && stats ? ", statistics " : (stats ? "statistics " : ""),
          stats ? stats : (trace ? "" : "nothing recorded"));
  char path[4096];
  snprintf(path, sizeof path, "%s/" DONE_PREFIX "%s", dir, rank);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0)
    close(fd);
  long done = 0;
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d)) != NULL;)
    done += strncmp(e->d_name, DONE_PREFIX, strlen(DONE_PREFIX)) == 0;
  if (d)
    closedir(d);
  /* The last rank to end here (one only: the exclusive create decides). */
  snprintf(path, sizeof path, "%s/.xptrace-job-ended", dir);
  if (mergeable && size && done >= size &&
      (fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)) >= 0) {
    close(fd);
    fprintf(stderr, "xptrace: the %ld ranks have ended; one trace of the job: xptrace merge %s\n",
            size, dir);
  }
}
