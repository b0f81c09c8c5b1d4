/*
 * false_sharing_bench.c -- measures the cost of false sharing on this machine
 * (thesis section 4.2.4, "Synthetic False Sharing Benchmark", Fig. 4.3).
 *
 * Two threads, pinned to two different CPUs when the process may use two,
 * modify (load + store, through a volatile pointer) 4-byte ints at 64-byte
 * strides, OPS times each:
 *
 *   fs    thread t uses fs_array[k*16 + t]: both threads write every line,
 *         4 bytes apart (false sharing);
 *   nofs  thread t uses its own page-aligned region (no line is shared).
 *
 * Both modes do the same number of operations on the same number of lines.
 * The modes alternate, REPS times each, after one warm-up run of each.
 *
 * Usage: false_sharing_bench OPS LINES REPS
 * Output (stdout), one line per timed run:
 *   run MODE WALL_S THREAD0_S THREAD1_S
 * and first a line
 *   pinned CPU0 CPU1        (or "pinned none" when fewer than 2 CPUs are usable)
 * Compiled by `cachescope calibrate` with gcc -O2 -pthread.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STRIDE_INTS 16 /* 64 bytes / sizeof(int) */
#define MAX_LINES 4096
#define PAGE_INTS 1024 /* 4 KiB gap between the nofs regions */

static int fs_array[MAX_LINES * STRIDE_INTS] __attribute__((aligned(4096)));
static int nofs_array[2][MAX_LINES * STRIDE_INTS + PAGE_INTS] __attribute__((aligned(4096)));

struct worker {
    int id;
    int cpu; /* -1: not pinned */
    int fs;
    long ops;
    long lines;
    double start_s, end_s;
    pthread_barrier_t *start;
};

/* Both workers spin here after the barrier so they start within a few ns of each other
 * (a barrier wake-up alone can be milliseconds apart on a VM). */
static volatile int ready;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *work(void *p)
{
    struct worker *w = p;
    if (w->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            perror("sched_setaffinity");
    }
    volatile int *a = w->fs ? fs_array + w->id : nofs_array[w->id];
    long reps = w->ops / w->lines;
    pthread_barrier_wait(w->start);
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < 2)
        ;
    w->start_s = now();
    for (long r = 0; r < reps; r++)
        for (long k = 0; k < w->lines; k++)
            a[k * STRIDE_INTS] += 1;
    w->end_s = now();
    return NULL;
}

/* One run of both threads; returns the wall time from the first start to the last end. */
static double run(int fs, long ops, long lines, const int cpus[2], double thread_s[2])
{
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 3);
    ready = 0;
    struct worker w[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (struct worker){i, cpus[i], fs, ops, lines, 0.0, 0.0, &start};
        if (pthread_create(&th[i], NULL, work, &w[i]) != 0) {
            perror("pthread_create");
            exit(3);
        }
    }
    pthread_barrier_wait(&start);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    thread_s[0] = w[0].end_s - w[0].start_s;
    thread_s[1] = w[1].end_s - w[1].start_s;
    double first = w[0].start_s < w[1].start_s ? w[0].start_s : w[1].start_s;
    double last = w[0].end_s > w[1].end_s ? w[0].end_s : w[1].end_s;
    return last - first;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s OPS LINES REPS\n", argv[0]);
        return 2;
    }
    long ops = atol(argv[1]);
    long lines = atol(argv[2]);
    int reps = atoi(argv[3]);
    if (ops < 1 || lines < 1 || lines > MAX_LINES || ops % lines != 0 || reps < 1) {
        fprintf(stderr, "bad arguments: OPS >= 1, 1 <= LINES <= %d, OPS a multiple of "
                        "LINES, REPS >= 1\n", MAX_LINES);
        return 2;
    }

    /* The first two CPUs this process may use. */
    int cpus[2] = {-1, -1};
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0) {
        int n = 0;
        for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
            if (CPU_ISSET(c, &allowed))
                cpus[n++] = c;
        if (n < 2)
            cpus[0] = cpus[1] = -1;
    }
    if (cpus[0] >= 0)
        printf("pinned %d %d\n", cpus[0], cpus[1]);
    else
        printf("pinned none\n");

    double ts[2];
    run(1, ops, lines, cpus, ts); /* warm-up: page faults, frequency ramp-up */
    run(0, ops, lines, cpus, ts);
    for (int r = 0; r < reps; r++) {
        for (int fs = 1; fs >= 0; fs--) {
            double wall = run(fs, ops, lines, cpus, ts);
            printf("run %s %.9f %.9f %.9f\n", fs ? "fs" : "nofs", wall, ts[0], ts[1]);
        }
    }
    /* Keep the arrays observable. */
    long sum = 0;
    for (long k = 0; k < lines * STRIDE_INTS; k++)
        sum += fs_array[k] + nofs_array[0][k] + nofs_array[1][k];
    long expect = (long)(reps + 1) * 4 * ops;
    if (sum != expect) {
        fprintf(stderr, "checksum mismatch: %ld, expected %ld\n", sum, expect);
        return 1;
    }
    return 0;
}
