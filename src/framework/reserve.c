/* Zeroed memory made ahead of need by a background thread.
 *
 * Creating a trace point writes ~450 bytes that nobody wrote before, and in
 * a VM faulting in fresh pages costs more than all the rest of the
 * creation.  So blocks of the sizes the tables will ask for next (the
 * pool's 2 MiB blocks, the next size of each index) are allocated and
 * populated by one helper thread, started when the pool's first block is a
 * quarter used: a program that makes a few hundred trace points never
 * starts it.  When a block is not ready the caller makes its
 * own; nothing ever waits for the thread.  The thread runs at SCHED_IDLE
 * (spare CPU only), blocks every signal (the program's handlers never run
 * on it) and holds no lock while it clears memory.  A forked child keeps
 * the blocks already made but starts no thread (a child of a threaded
 * process should not, and sanitizers refuse it): it makes its own. */
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define RESERVE_SIZES 12

typedef struct reserve_entry {
  size_t size;   /* 0: unused entry */
  unsigned want; /* blocks of this size to keep ready */
  unsigned ready;
  void *block[2];
} reserve_entry_t;

static struct {
  pthread_mutex_t lock;
  pthread_mutex_t work; /* held while the thread allocates or frees */
  pthread_cond_t wake;
  bool started;
  bool forked; /* in a child: no thread */
  reserve_entry_t entry[RESERVE_SIZES];
  /* apart from the flags above: a compiler may read both in one load */
  _Atomic bool alive; /* the thread reached reserve_main */
} g_res = {.lock = PTHREAD_MUTEX_INITIALIZER,
           .work = PTHREAD_MUTEX_INITIALIZER,
           .wake = PTHREAD_COND_INITIALIZER};

/* The first entry whose want exceeds what is ready (lock held). */
static reserve_entry_t *reserve_short(void) {
  for (int i = 0; i < RESERVE_SIZES; i++)
    if (g_res.entry[i].size && g_res.entry[i].ready < g_res.entry[i].want)
      return &g_res.entry[i];
  return NULL;
}

static void *reserve_main(void *arg) {
  (void)arg;
  atomic_store(&g_res.alive, true);
  /* Spare CPU only: it never takes a core from the program's threads. */
  struct sched_param idle = {0};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
  pthread_mutex_lock(&g_res.lock);
  for (;;) {
    reserve_entry_t *e;
    while (!(e = reserve_short()))
      pthread_cond_wait(&g_res.wake, &g_res.lock);
    size_t size = e->size;
    pthread_mutex_unlock(&g_res.lock);
    /* Only the allocation under work (what a fork waits for): the slow
     * filling runs outside it, so that a fork never waits for this
     * thread to be given a CPU, nor do callers, who never wait at all. */
    pthread_mutex_lock(&g_res.work);
    void *block = huge_alloc(size);
    pthread_mutex_unlock(&g_res.work);
    if (block)
      huge_fill(block, size);
    pthread_mutex_lock(&g_res.work);
    pthread_mutex_lock(&g_res.lock);
    if (!block)
      e->want = 0; /* no memory: stop asking */
    else if (e->size == size && e->ready < e->want && e->ready < 2)
      e->block[e->ready++] = block, block = NULL;
    pthread_mutex_unlock(&g_res.lock);
    huge_free(block, size); /* no longer wanted */
    pthread_mutex_unlock(&g_res.work);
    pthread_mutex_lock(&g_res.lock);
  }
  return NULL;
}

/* Lock held. */
static void reserve_start(void) {
  if (g_res.started || g_res.forked)
    return;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* inherited by the thread */
  pthread_attr_t attr;
  pthread_t thread;
  if (pthread_attr_init(&attr) == 0) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    if (pthread_create(&thread, &attr, reserve_main, NULL) == 0) {
      g_res.started = true;
      pthread_setname_np(thread, "xpti-reserve");
    }
    pthread_attr_destroy(&attr);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Lock held: the entry for size, made when missing (NULL when full). */
static reserve_entry_t *reserve_entry(size_t size) {
  reserve_entry_t *free_entry = NULL;
  for (int i = 0; i < RESERVE_SIZES; i++) {
    if (g_res.entry[i].size == size)
      return &g_res.entry[i];
    if (!g_res.entry[i].size && !free_entry)
      free_entry = &g_res.entry[i];
  }
  if (free_entry)
    *free_entry = (reserve_entry_t){.size = size};
  return free_entry;
}

/* Callers never wait: when the thread holds the lock (it may have been
 * preempted there), a want is dropped and a take finds nothing. */
void reserve_want(size_t size, unsigned count) {
  if (pthread_mutex_trylock(&g_res.lock) != 0)
    return;
  reserve_entry_t *e = reserve_entry(size);
  if (e && e->want < count) {
    e->want = count > 2 ? 2 : count;
    reserve_start();
    pthread_cond_signal(&g_res.wake);
  }
  pthread_mutex_unlock(&g_res.lock);
}

void *reserve_take(size_t size, unsigned keep) {
  void *block = NULL;
  if (pthread_mutex_trylock(&g_res.lock) != 0)
    return NULL;
  reserve_entry_t *e = reserve_entry(size);
  if (e) {
    if (e->ready)
      block = e->block[--e->ready];
    e->want = keep > 2 ? 2 : keep;
    if (e->ready < e->want) {
      reserve_start();
      pthread_cond_signal(&g_res.wake);
    }
  }
  pthread_mutex_unlock(&g_res.lock);
  return block;
}

/* The child gets no copy of the thread, so a heap lock it held at the fork
 * would stay held there.  The C library's allocator takes care of that,
 * sanitizers' allocators do not: a fork waits for the thread to be out of
 * the heap, and out of its own start (which allocates too). */
void reserve_fork_lock(void) {
  pthread_mutex_lock(&g_res.lock);
  bool starting = g_res.started && !atomic_load(&g_res.alive);
  pthread_mutex_unlock(&g_res.lock);
  for (int i = 0; starting && !atomic_load(&g_res.alive) && i < 10000; i++) {
    struct timespec pause = {0, 100000};
    nanosleep(&pause, NULL);
  }
  pthread_mutex_lock(&g_res.work);
  pthread_mutex_lock(&g_res.lock);
}

void reserve_fork_unlock(bool child) {
  if (child) { /* the thread did not come along; its block in hand is lost */
    g_res.started = false;
    g_res.forked = true;
    pthread_cond_init(&g_res.wake, NULL);
  }
  pthread_mutex_unlock(&g_res.lock);
  pthread_mutex_unlock(&g_res.work);
}
