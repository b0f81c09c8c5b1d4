/*
 * mutex_counter.c -- a shared counter protected by a pthread mutex.
 *
 * Demonstrates: true sharing plus lock traffic with plain pthreads (no
 * OpenMP): NTHREADS threads each increment the global shared_counter M
 * times, each increment under counter_lock.  The counter's line and the
 * mutex's line move between the cores on every increment (thesis §4.2:
 * true sharing, as opposed to false sharing; also exercises the tracer's
 * lock events).
 *
 * Usage: mutex_counter [M [NTHREADS]]   (defaults M=100000, NTHREADS=2)
 * Output: the final counter, which must equal NTHREADS*M.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define MAX_THREADS 256

long shared_counter;
pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;
static long iterations;

static void *worker(void *arg)
{
    (void)arg;
    for (long i = 0; i < iterations; i++) {
        pthread_mutex_lock(&counter_lock);
        shared_counter++;
        pthread_mutex_unlock(&counter_lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    iterations = argc > 1 ? atol(argv[1]) : 100000;
    long nthreads = argc > 2 ? atol(argv[2]) : 2;
    if (iterations < 0 || nthreads < 1 || nthreads > MAX_THREADS) {
        fprintf(stderr, "usage: %s [M [NTHREADS<=%d]]\n", argv[0], MAX_THREADS);
        return 2;
    }
    pthread_t tid[MAX_THREADS];
    for (long t = 0; t < nthreads; t++)
        if (pthread_create(&tid[t], NULL, worker, NULL) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 2;
        }
    for (long t = 0; t < nthreads; t++)
        pthread_join(tid[t], NULL);

    long expected = nthreads * iterations;
    printf("mutex_counter threads=%ld M=%ld counter=%ld expected=%ld %s\n",
           nthreads, iterations, shared_counter, expected,
           shared_counter == expected ? "ok" : "MISMATCH");
    return shared_counter == expected ? 0 : 1;
}
