/*
 * false_sharing.c -- the false-sharing micro-benchmark of thesis Fig. 4.3.
 *
 * Demonstrates: false sharing.  Each OpenMP thread t repeatedly modifies
 * (load + store) the 4-byte int elements fs_array[k*16 + t], k = 0..LINES-1,
 * i.e. one int per 64-byte line, and thread t+1 uses the int 4 bytes further
 * on.  No datum is shared, but every line of fs_array is written by all
 * threads, so with 64-byte lines the line ping-pongs between the cores'
 * caches (coherence misses/invalidations).  fs_array is a named global with
 * static storage so a symbolizer can attribute the misses to it.
 * The fixed layout is in false_sharing_padded.c.
 *
 * Usage: false_sharing [REPS [LINES]]   (defaults REPS=10000, LINES=64)
 * Output (stdout) does not depend on the thread count; the thread count is
 * printed on stderr.  At most 16 threads (one int slot per thread per line).
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define STRIDE_INTS 16 /* 64 bytes / sizeof(int) */
#define MAX_THREADS 16
#define MAX_LINES 4096

int fs_array[MAX_LINES * STRIDE_INTS] __attribute__((aligned(64)));

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
            volatile int *a = fs_array;
            for (long r = 0; r < reps; r++)
                for (long k = 0; k < lines; k++)
                    a[k * STRIDE_INTS + t] += 1; /* threads 4 bytes apart */
        }
    }
    if (nthreads > MAX_THREADS) {
        fprintf(stderr, "at most %d threads supported\n", MAX_THREADS);
        return 2;
    }

    long sum = 0;
    for (long k = 0; k < lines * STRIDE_INTS; k++)
        sum += fs_array[k];
    fprintf(stderr, "threads=%d\n", nthreads);
    printf("false_sharing reps=%ld lines=%ld updates_per_thread=%ld %s\n",
           reps, lines, reps * lines,
           sum == (long)nthreads * reps * lines ? "checksum=ok" : "checksum=BAD");
    return sum == (long)nthreads * reps * lines ? 0 : 1;
}
