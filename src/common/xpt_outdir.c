/* xptrace common — the output folder of the process (see xpt_files.h).
 * The state lives in the process-wide xpt_shared_t, so every collector
 * and the sampler write into the same folder even when the default name
 * has to move to "-1" because it existed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xpt_files.h"
#include "xpt_shared.h"

/* Absolute, so that a later chdir() in the program does not move it. */
static void outdir_set_in(char *out, size_t len, const char *path) {
  char cwd[PATH_MAX];
  if (path[0] == '/' || !getcwd(cwd, sizeof cwd) ||
      snprintf(out, len, "%s/%s", cwd, path) >= (int)len)
    snprintf(out, len, "%s", path);
}
static void outdir_set(xpt_shared_t *s, const char *path) {
  outdir_set_in(s->out_path, sizeof s->out_path, path);
}

/* The MPI rank of this process, from the launcher's variables (NULL:
 * none, or not a number). */
static const char *outdir_mpi_rank(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    size_t n = v ? strlen(v) : 0;
    if (n && n < 10 && strspn(v, "0123456789") == n)
      return v;
  }
  return NULL;
}

/* Under `xptrace run`: every process writes into a folder of its own in
 * the run's folder, "<program>-<pid>" or "rank-<r>-<program>-<pid>". */
static void outdir_session_leaf(xpt_shared_t *s) {
  const char *rank = outdir_mpi_rank();
  char leaf[PATH_MAX];
  if (rank)
    snprintf(leaf, sizeof leaf, "rank-%s-%.200s-%d", rank, xpt_program_name(), (int)getpid());
  else
    snprintf(leaf, sizeof leaf, "%.200s-%d", xpt_program_name(), (int)getpid());
  if (snprintf(s->out_path, sizeof s->out_path, "%s/%s", s->out_base, leaf) >=
      (int)sizeof s->out_path)
    s->out_path[0] = '\0';
}

/* The session's mark in a process folder: which `xptrace run` it is of
 * (a shared -o holds the folders of several). */
static void outdir_session_mark(const xpt_shared_t *s) {
  char path[PATH_MAX + 32];
  snprintf(path, sizeof path, "%s/xptrace.session", s->out_path);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    return; /* EEXIST: an exec'd image of the same program and pid */
  char line[sizeof s->out_token + 1];
  int n = snprintf(line, sizeof line, "%s\n", s->out_token);
  if (n > 0 && write(fd, line, (size_t)n) != n)
    xpt_msg_once("session-mark", "xpti: cannot write %s", path);
  close(fd);
}

static void outdir_compute_base_locked(xpt_shared_t *s) {
  if (s->out_pid)
    return;
  const char *env = secure_getenv("XPTRACE_OUTPUT");
  const char *token = secure_getenv("XPTRACE_SESSION");
  if (env && *env && token && *token && strlen(token) < sizeof s->out_token &&
      !strchr(token, '\n')) {
    outdir_set_in(s->out_base, sizeof s->out_base, env);
    snprintf(s->out_token, sizeof s->out_token, "%s", token);
    s->out_session = true;
    s->out_default = false;
    s->out_pid = getpid();
    outdir_session_leaf(s);
    return;
  }
  if (env && *env) {
    outdir_set(s, env);
    s->out_default = false;
  } else {
    char name[PATH_MAX];
    snprintf(name, sizeof name, "xptrace-%s-%d", xpt_program_name(), (int)getpid());
    outdir_set(s, name);
    s->out_default = true;
  }
  s->out_pid = getpid();
}

static int outdir_create_locked(xpt_shared_t *s, char *why, size_t whylen) {
  /* The default name is a guess anyone can make (the pid): a folder
   * already there is never ours to use, unless our parent process
   * created it (named at fork, made by an earlier child). */
  if (s->out_default && !s->out_fixed)
    return xpt_dir_create_new(s->out_path, sizeof s->out_path, why, whylen);
  return xpt_dir_prepare(s->out_path, why, whylen);
}

const char *xpt_output_dir(void) {
  xpt_shared_t *s = xpt_shared();
  pthread_mutex_lock(&s->lock);
  outdir_compute_base_locked(s);
  char why[PATH_MAX + 128];
  if (s->out_session && s->out_pid != getpid()) {
    /* A forked child: a folder of its own in the run's folder. */
    s->out_pid = getpid();
    outdir_session_leaf(s);
    s->out_created = s->out_failed = false;
  } else if (s->out_pid != getpid()) {
    /* A forked child: its own folder under the parent's, which must be
     * a safe folder of ours too (made now if the parent never did). */
    char child[PATH_MAX];
    int n = snprintf(child, sizeof child, "%s/child-%d", s->out_path, (int)getpid());
    int err = s->out_created ? 0 : outdir_create_locked(s, why, sizeof why);
    if (n > 0 && (size_t)n < sizeof child)
      memcpy(s->out_path, child, (size_t)n + 1);
    s->out_pid = getpid();
    s->out_default = s->out_fixed = false;
    s->out_created = false;
    s->out_failed = err != 0;
    if (err)
      xpt_msg_once("outdir-failed", "xpti: %s", why);
  }
  if (!s->out_created && !s->out_failed) {
    int err = 0;
    if (s->out_session && !s->out_base_created) {
      err = xpt_dir_prepare(s->out_base, why, sizeof why);
      s->out_base_created = err == 0;
    }
    if (err == 0 && s->out_session && !s->out_path[0]) {
      snprintf(why, sizeof why, "output folder name too long under '%s'", s->out_base);
      err = ENAMETOOLONG;
    }
    if (err == 0)
      err = outdir_create_locked(s, why, sizeof why);
    if (err == 0 && s->out_session)
      outdir_session_mark(s);
    if (err == 0) {
      s->out_created = true;
    } else {
      s->out_failed = true;
      xpt_msg_once("outdir-failed", "xpti: %s", why);
    }
  }
  const char *result = s->out_created ? s->out_path : NULL;
  pthread_mutex_unlock(&s->lock);
  return result;
}

/* Before fork the folder's name is fixed (not created), so that the
 * child can name its own folder under it. */
static void outdir_fork_prepare(void) {
  xpt_shared_t *s = xpt_shared();
  pthread_mutex_lock(&s->lock);
  if (!s->out_pid) {
    outdir_compute_base_locked(s);
    s->out_fixed = true;
  }
}

static void outdir_fork_parent(void) { pthread_mutex_unlock(&xpt_shared()->lock); }
static void outdir_fork_child(void) { pthread_mutex_unlock(&xpt_shared()->lock); }

/* Called from the load-time constructor: one set of fork handlers per
 * process, by the copy whose state is the shared one. */
void xpt_outdir_init(void) {
  if (xpt_shared() == &xpt_shared_own)
    pthread_atfork(outdir_fork_prepare, outdir_fork_parent, outdir_fork_child);
}
