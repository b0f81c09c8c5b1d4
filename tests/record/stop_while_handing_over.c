/* Threads that fill their event buffers as fast as they can, take a mutex and create and join
 * short threads, until a stop signal ends the program:
 *   stop_while_handing_over PIDFILE
 * writes "PID ADDRESS-OF-a" to PIDFILE (atomically, by a rename) once its workers run. Each
 * worker stores into its row a[t] at indices i, next(i), next(next(i)), ... (a full-period
 * congruential sequence: addresses that look random keep the trace's writer busy, so the
 * workers wait on its queue): a trace that lost a buffer in the middle of a thread's stream
 * shows a jump in that sequence. The mutex's
 * acquisitions and the threads' creations must all be in the trace, or it cannot be replayed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define WORKERS 8
#define N 8192 /* a power of two: NEXT visits every index */
#define NEXT(i) (((i) * 1664525 + 1013904223) & (N - 1))

static long a[WORKERS][N];
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile long total;

static void *brief(void *p) {
  ((volatile long *)p)[0] += 1;
  return 0;
}

static void *work(void *arg) {
  volatile long *mine = a[(long)arg];
  unsigned long i = 0;
  for (long it = 0;; it++) {
    for (long k = 0; k < N; k++) {
      mine[i] = k + it;
      i = NEXT(i);
    }
    pthread_mutex_lock(&m);
    total++;
    pthread_mutex_unlock(&m);
    {
      pthread_t t;
      pthread_create(&t, 0, brief, (void *)&total);
      pthread_join(t, 0);
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  pthread_t t[WORKERS];
  for (long i = 0; i < WORKERS; i++) pthread_create(&t[i], 0, work, (void *)i);
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
  FILE *f = fopen(tmp, "w");
  if (!f) return 2;
  fprintf(f, "%d %lu\n", (int)getpid(), (unsigned long)&a[0][0]);
  fclose(f);
  if (rename(tmp, argv[1]) != 0) return 2;
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], 0);
  return 0;
}
