/* Explicit OpenMP tasks run by a thread waiting in a barrier (tests/record_programs.rs).
 *
 *   omp_tasks locked: as `siblings`, each task allocating and freeing a 48-byte block and
 *     entering a critical section 100 times: the task run in the barrier takes the program's
 *     lock and heap calls, which are recorded as the other task's are.
 *
 *   omp_tasks siblings: a `single` spawns two tasks and waits for them (taskwait); each
 *     task waits until the other has started, so the creator runs one in its taskwait while
 *     the other thread, waiting at the single's barrier, runs the other: the two write
 *     neighbouring counters at the same time (false sharing on `cnt`).
 *   omp_tasks join: the master spawns one task and waits until another thread has started
 *     it; that thread runs it in the region's closing barrier. After the region, main alone
 *     writes the neighbouring counter: never at the same time as the task (no false sharing).
 */
#include <omp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Alignas(64) long cnt[2];
/* On a line of its own: the tasks' hand-shake (and the master's spin on it) is not the
   data under test. */
struct {
    _Alignas(64) atomic_int n;
    char pad[60];
} started;

static void bump(int k, long n, int wait_for) {
    atomic_fetch_add(&started.n, 1);
    while (atomic_load(&started.n) < wait_for)
        ;
    volatile long *c = &cnt[k];
    for (long i = 0; i < n; i++)
        (*c)++; /* TASK_WRITE */
}

static void locked(int k) {
    atomic_fetch_add(&started.n, 1);
    while (atomic_load(&started.n) < 2)
        ;
    for (int i = 0; i < 100; i++) {
        volatile long *p = malloc(48);
        *p = i;
#pragma omp critical
        cnt[k] += *p > 0;
        free((void *)p);
    }
}

int main(int argc, char **argv) {
    int join = argc > 1 && strcmp(argv[1], "join") == 0;
    if (argc > 1 && strcmp(argv[1], "locked") == 0) {
#pragma omp parallel num_threads(2)
#pragma omp single
        {
#pragma omp task
            locked(0);
#pragma omp task
            locked(1);
#pragma omp taskwait
        }
    } else if (!join) {
#pragma omp parallel num_threads(2)
#pragma omp single
        {
#pragma omp task
            bump(0, 1000000, 2);
#pragma omp task
            bump(1, 1000000, 2);
#pragma omp taskwait
        }
    } else {
#pragma omp parallel num_threads(2)
#pragma omp master
        {
#pragma omp task
            bump(0, 1000000, 1);
            /* No task scheduling point here: the other thread must take the task. */
            while (atomic_load(&started.n) < 1)
                ;
        }
        volatile long *c = &cnt[1];
        for (long i = 0; i < 2000000; i++)
            (*c)++; /* SERIAL_WRITE */
    }
    printf("%ld %ld\n", cnt[0], cnt[1]);
    return 0;
}
