/* A worker fills box.a, then hands the line over; main waits for the hand-over and only then
   fills box.b (the other half of one 64-byte line). argv[1] picks the hand-over:
     c11        C11 threads: thrd_create, mtx_t + cnd_t, thrd_join
     sem        a POSIX semaphore: sem_post / sem_wait
     clockwait  a mutex and pthread_cond_clockwait (what C++'s condition_variable::wait_for
                calls)
     rwlock     a flag set under a read-write lock's write lock, polled under its read lock
                (C++'s std::shared_mutex)
     spin       a flag set under a spin lock, polled under it
     none       no hand-over: main fills box.b while the worker fills box.a (false sharing,
                the control)
   Prints the two sums. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <threads.h>
#include <time.h>

#define N 200000

static struct {
  _Alignas(64) volatile long a;
  volatile long b;
} box;

static int mode; /* 0 c11, 1 sem, 2 clockwait, 3 none, 4 rwlock, 5 spin */
static mtx_t c11_mtx;
static cnd_t c11_cnd;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static sem_t sem;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static pthread_spinlock_t spin;
static int ready;

static void fill_a(void) {
  for (long i = 0; i < N; i++)
    box.a += i; /* A_STORE */
}

static void fill_b(void) {
  for (long i = 0; i < N; i++)
    box.b += i; /* B_STORE */
}

static void hand_over(void) {
  switch (mode) {
  case 0:
    mtx_lock(&c11_mtx);
    ready = 1;
    cnd_signal(&c11_cnd);
    mtx_unlock(&c11_mtx);
    break;
  case 1:
    sem_post(&sem);
    break;
  case 2:
    pthread_mutex_lock(&mu);
    ready = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    break;
  case 4:
    pthread_rwlock_wrlock(&rw);
    ready = 1;
    pthread_rwlock_unlock(&rw);
    break;
  case 5:
    pthread_spin_lock(&spin);
    ready = 1;
    pthread_spin_unlock(&spin);
    break;
  }
}

static void take_over(void) {
  int seen = 0;
  switch (mode) {
  case 0:
    mtx_lock(&c11_mtx);
    while (!ready)
      cnd_wait(&c11_cnd, &c11_mtx);
    mtx_unlock(&c11_mtx);
    break;
  case 1:
    while (sem_wait(&sem) != 0) {
    }
    break;
  case 2:
    pthread_mutex_lock(&mu);
    while (!ready) {
      struct timespec t;
      clock_gettime(CLOCK_MONOTONIC, &t);
      t.tv_sec += 1;
      pthread_cond_clockwait(&cv, &mu, CLOCK_MONOTONIC, &t);
    }
    pthread_mutex_unlock(&mu);
    break;
  case 4:
    while (!seen) {
      pthread_rwlock_rdlock(&rw);
      seen = ready;
      pthread_rwlock_unlock(&rw);
    }
    break;
  case 5:
    while (!seen) {
      pthread_spin_lock(&spin);
      seen = ready;
      pthread_spin_unlock(&spin);
    }
    break;
  }
}

static int c11_worker(void *arg) {
  (void)arg;
  fill_a();
  hand_over();
  return 7;
}

static void *worker(void *arg) {
  (void)arg;
  fill_a();
  hand_over();
  return NULL;
}

int main(int argc, char **argv) {
  const char *m = argc > 1 ? argv[1] : "c11";
  static const char *modes[] = {"c11", "sem", "clockwait", "none", "rwlock", "spin"};
  for (int i = 0; i < 6; i++)
    if (!strcmp(m, modes[i]))
      mode = i;
  pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
  if (mode == 0) {
    thrd_t t;
    int res = 0;
    mtx_init(&c11_mtx, mtx_plain);
    cnd_init(&c11_cnd);
    if (thrd_create(&t, c11_worker, NULL) != thrd_success)
      return 2;
    take_over();
    fill_b();
    if (thrd_join(t, &res) != thrd_success || res != 7)
      return 3;
  } else {
    pthread_t t;
    sem_init(&sem, 0, 0);
    pthread_create(&t, NULL, worker, NULL);
    take_over();
    fill_b();
    pthread_join(t, NULL);
  }
  printf("%ld %ld\n", box.a, box.b);
  return 0;
}
