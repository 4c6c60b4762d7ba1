/* xptrace common — the output folder of the process (see xpt_files.h).
 * The state lives in the process-wide xpt_shared_t, so every collector
 * and the sampler write into the same folder even when the default name
 * has to move to "-1" because it existed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xpt_files.h"
#include "xpt_shared.h"

/* Absolute, so that a later chdir() in the program does not move it. */
static void outdir_set(xpt_shared_t *s, const char *path) {
  char cwd[PATH_MAX];
  if (path[0] == '/' || !getcwd(cwd, sizeof cwd) ||
      snprintf(s->out_path, sizeof s->out_path, "%s/%s", cwd, path) >= (int)sizeof s->out_path)
    snprintf(s->out_path, sizeof s->out_path, "%s", path);
}

static void outdir_compute_base_locked(xpt_shared_t *s) {
  if (s->out_pid)
    return;
  const char *env = secure_getenv("XPTRACE_OUTPUT");
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
  if (s->out_pid != getpid()) {
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
    int err = outdir_create_locked(s, why, sizeof why);
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
