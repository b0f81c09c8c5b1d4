/*
 * false_sharing_padded.c -- the fixed layout for the thesis Fig. 4.3 benchmark.
 *
 * Demonstrates: the same work as false_sharing.c without false sharing.
 * Each thread t again modifies (load + store) one 4-byte int per 64-byte
 * line, LINES lines, REPS times, but in its own disjoint part of the array:
 * fsp_array[t*LINES*16 + k*16].  No line is touched by two threads, so after
 * the first pass every access hits in the thread's own cache.
 *
 * Usage: false_sharing_padded [REPS [LINES]]   (defaults REPS=10000, LINES=64)
 * Output (stdout) does not depend on the thread count; the thread count is
 * printed on stderr.  At most 16 threads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define STRIDE_INTS 16 /* 64 bytes / sizeof(int) */
#define MAX_THREADS 16
#define MAX_LINES 4096

int fsp_array[MAX_THREADS * MAX_LINES * STRIDE_INTS] __attribute__((aligned(64)));

int main(int argc, char **argv)
{
    long reps = argc > 1 ? atol(argv[1]) : 10000;
    long lines = argc > 2 ? atol(argv[2]) : 64;
    if (reps < 0 || lines < 1 || lines > MAX_LINES) {
        fprintf(stderr, "usage: %s [REPS [LINES<=%d]]\n", argv[0], MAX_LINES);
        return 2;
    }
    int nthreads = 1;

#pragma omp parallel
    {
        int t = omp_get_thread_num();
#pragma omp single
        nthreads = omp_get_num_threads();
        if (nthreads <= MAX_THREADS) {
            /* volatile: one real load and store per update */
            volatile int *a = fsp_array + (long)t * lines * STRIDE_INTS;
            for (long r = 0; r < reps; r++)
                for (long k = 0; k < lines; k++)
                    a[k * STRIDE_INTS] += 1; /* own region: no sharing */
        }
    }
    if (nthreads > MAX_THREADS) {
        fprintf(stderr, "at most %d threads supported\n", MAX_THREADS);
        return 2;
    }

    long sum = 0;
    for (long k = 0; k < (long)nthreads * lines * STRIDE_INTS; k++)
        sum += fsp_array[k];
    fprintf(stderr, "threads=%d\n", nthreads);
    printf("false_sharing_padded reps=%ld lines=%ld updates_per_thread=%ld %s\n",
           reps, lines, reps * lines,
           sum == (long)nthreads * reps * lines ? "checksum=ok" : "checksum=BAD");
    return sum == (long)nthreads * reps * lines ? 0 : 1;
}
