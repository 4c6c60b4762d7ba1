/* xptrace common — safe output folders and files (see xpt_files.h). */
#include "xpt_files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *xpt_program_name(void) {
  const char *name = program_invocation_short_name;
  return (name && *name) ? name : "program";
}

/* The checks on a folder we are about to write into. */
static int dir_check_fd(int fd, const char *path, char *why, size_t whylen) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    snprintf(why, whylen, "cannot use output folder '%s': %s", path, strerror(err));
    return err;
  }
  if (st.st_uid != geteuid()) {
    snprintf(why, whylen, "output folder '%s' is owned by another user (uid %u); not writing there",
             path, (unsigned)st.st_uid);
    return EPERM;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(why, whylen, "output folder '%s' is writable by %s; not writing there", path,
             (st.st_mode & S_IWOTH) ? "others" : "its group");
    return EPERM;
  }
  return 0;
}

int xpt_dir_open(const char *path, char *why, size_t whylen) {
  char spare[8];
  if (!why || whylen == 0)
    why = spare, whylen = sizeof spare;
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    struct stat st;
    /* O_NOFOLLOW on a symlink: ELOOP (or ENOTDIR with O_DIRECTORY). */
    if ((err == ELOOP || err == ENOTDIR) && lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
      snprintf(why, whylen, "output folder '%s' is a symbolic link; not writing there", path);
      err = EPERM;
    } else {
      snprintf(why, whylen, "cannot create output directory '%s': %s", path, strerror(err));
    }
    errno = err;
    return -1;
  }
  int err = dir_check_fd(fd, path, why, whylen);
  if (err) {
    close(fd);
    errno = err;
    return -1;
  }
  if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
    err = errno;
    snprintf(why, whylen, "cannot create output directory '%s': %s", path, strerror(err));
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

int xpt_dir_prepare(const char *path, char *why, size_t whylen) {
  char spare[8];
  if (!why || whylen == 0)
    why = spare, whylen = sizeof spare;
  char copy[PATH_MAX];
  size_t len = strlen(path);
  if (len == 0 || len >= sizeof copy) {
    snprintf(why, whylen, "cannot create output directory '%s': %s", path,
             strerror(len ? ENAMETOOLONG : ENOENT));
    return len ? ENAMETOOLONG : ENOENT;
  }
  memcpy(copy, path, len + 1);
  while (len > 1 && copy[len - 1] == '/')
    copy[--len] = '\0';
  /* Parents: created 0700 when missing; existing ones (/tmp, $HOME) are
   * the user's business. */
  for (char *p = copy + 1; *p; ++p) {
    if (*p != '/')
      continue;
    *p = '\0';
    int rc = mkdir(copy, 0700);
    int err = errno;
    *p = '/';
    if (rc != 0 && err != EEXIST) {
      snprintf(why, whylen, "cannot create output directory '%s': %s", copy, strerror(err));
      return err;
    }
  }
  if (mkdir(copy, 0700) != 0 && errno != EEXIST) {
    int err = errno;
    snprintf(why, whylen, "cannot create output directory '%s': %s", copy, strerror(err));
    return err;
  }
  int fd = xpt_dir_open(copy, why, whylen);
  if (fd < 0)
    return errno;
  close(fd);
  return 0;
}

int xpt_dir_create_new(char *path, size_t size, char *why, size_t whylen) {
  char spare[8];
  if (!why || whylen == 0)
    why = spare, whylen = sizeof spare;
  char base[PATH_MAX];
  if (snprintf(base, sizeof base, "%s", path) >= (int)sizeof base) {
    snprintf(why, whylen, "cannot create output directory '%s': %s", path,
             strerror(ENAMETOOLONG));
    return ENAMETOOLONG;
  }
  for (int n = 0; n < 1000; ++n) {
    if (n && snprintf(path, size, "%s-%d", base, n) >= (int)size) {
      snprintf(why, whylen, "cannot create output directory '%s': %s", base,
               strerror(ENAMETOOLONG));
      return ENAMETOOLONG;
    }
    if (mkdir(path, 0700) == 0) {
      int fd = xpt_dir_open(path, why, whylen); /* ours: only a sanity check */
      if (fd < 0)
        return errno;
      close(fd);
      return 0;
    }
    if (errno != EEXIST) {
      int err = errno;
      snprintf(why, whylen, "cannot create output directory '%s': %s", path, strerror(err));
      return err;
    }
  }
  snprintf(why, whylen, "cannot create output directory '%s': every name up to -999 is taken",
           base);
  return EEXIST;
}

int xpt_create_fileat(int dirfd, const char *name, char *actual, size_t len) {
  const char *dot = strrchr(name, '.');
  size_t stem = dot && dot != name ? (size_t)(dot - name) : strlen(name);
  char candidate[NAME_MAX + 1];
  for (int n = 0; n < 1000; ++n) {
    int w = n ? snprintf(candidate, sizeof candidate, "%.*s-%d%s", (int)stem, name, n, name + stem)
              : snprintf(candidate, sizeof candidate, "%s", name);
    if (w < 0 || (size_t)w >= sizeof candidate) {
      errno = ENAMETOOLONG;
      return -1;
    }
    int fd = openat(dirfd, candidate, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      if (actual && len)
        snprintf(actual, len, "%s", candidate);
      return fd;
    }
    if (errno != EEXIST)
      return -1;
  }
  errno = EEXIST;
  return -1;
}

int xpt_create_file(const char *dir, const char *name, char *path, size_t len) {
  char why[8];
  int dfd = xpt_dir_open(dir, why, sizeof why);
  if (dfd < 0)
    return -1;
  char actual[NAME_MAX + 1];
  int fd = xpt_create_fileat(dfd, name, actual, sizeof actual);
  int err = errno;
  close(dfd);
  if (path && len)
    snprintf(path, len, "%s/%s", dir, fd >= 0 ? actual : name);
  errno = err;
  return fd;
}

FILE *xpt_create_stream(const char *dir, const char *name, char *path, size_t len) {
  int fd = xpt_create_file(dir, name, path, len);
  if (fd < 0)
    return NULL;
  FILE *f = fdopen(fd, "w");
  if (!f) {
    int err = errno;
    close(fd);
    errno = err;
  }
  return f;
}
