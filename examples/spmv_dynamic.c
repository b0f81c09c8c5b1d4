/*
 * spmv_dynamic.c -- CSR sparse matrix-vector product with dynamic scheduling.
 *
 * Demonstrates: false sharing on the output vector caused by a small chunk
 * size.  y = A*x is computed REPS times with
 * `#pragma omp parallel for schedule(dynamic, CHUNK)` over the rows; each
 * row i writes y[i] (8 bytes).  With CHUNK=1 consecutive rows go to
 * different threads, so up to 8 threads' writes land in the same 64-byte
 * line of y (false sharing); with CHUNK=16 each chunk owns 128 bytes of y,
 * exactly two whole lines because y is allocated line-aligned (see main),
 * so no line of y is written by two threads.  Run it with CHUNK 1 and 16.
 * The matrix is generated deterministically: a tridiagonal band plus
 * EXTRA pseudo-random entries per row from a fixed LCG.
 *
 * Usage: spmv_dynamic [CHUNK [N [REPS]]]   (defaults CHUNK=1, N=100000, REPS=10)
 * Output: checksum of y; independent of thread count and CHUNK (each y[i]
 * is summed in a fixed order by one thread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define EXTRA 2
#define LINE 64 /* cache-line size the arrays are aligned to */

/* bytes rounded up to whole lines (aligned_alloc wants a multiple of the alignment) */
static size_t line_bytes(size_t bytes)
{
    return (bytes + LINE - 1) / LINE * LINE;
}

static unsigned long lcg_state = 12345;
static unsigned long lcg(void)
{
    lcg_state = lcg_state * 6364136223846793005UL + 1442695040888963407UL;
    return lcg_state >> 33;
}

int main(int argc, char **argv)
{
    long chunk = argc > 1 ? atol(argv[1]) : 1;
    long n = argc > 2 ? atol(argv[2]) : 100000;
    long reps = argc > 3 ? atol(argv[3]) : 10;
    if (chunk < 1 || n < 2 || reps < 1) {
        fprintf(stderr, "usage: %s [CHUNK>=1 [N>=2 [REPS>=1]]]\n", argv[0]);
        return 2;
    }
    long cap = n * (3 + EXTRA);
    /* Every array is allocated line-aligned, its size rounded up to whole
     * lines.  What matters is y, the only array written in the parallel loop:
     * malloc aligns to 16 bytes only, so a 16-row chunk of y (128 bytes)
     * would start in the middle of a line, the line at every chunk border
     * would be written by two threads (false sharing with chunk 16 too), and
     * y's first and last lines would hold bytes of the neighbouring heap
     * blocks.  Aligned, a 16-row chunk is exactly two lines that nothing else
     * touches.  The read-only arrays are aligned the same way for a uniform
     * layout.  Each allocation is its own call in main: the audit names heap
     * blocks by allocation site. */
    long *row_ptr = aligned_alloc(LINE, line_bytes(sizeof(long) * (n + 1)));
    long *col = aligned_alloc(LINE, line_bytes(sizeof(long) * cap));
    double *val = aligned_alloc(LINE, line_bytes(sizeof(double) * cap));
    double *x = aligned_alloc(LINE, line_bytes(sizeof(double) * n));
    double *y = aligned_alloc(LINE, line_bytes(sizeof(double) * n));
    if (!row_ptr || !col || !val || !x || !y) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }

    long nnz = 0; /* build CSR serially: deterministic */
    for (long i = 0; i < n; i++) {
        row_ptr[i] = nnz;
        for (long j = i - 1; j <= i + 1; j++)
            if (j >= 0 && j < n) {
                col[nnz] = j;
                val[nnz++] = (j == i) ? 4.0 : -1.0;
            }
        for (int e = 0; e < EXTRA; e++) {
            col[nnz] = (long)(lcg() % (unsigned long)n);
            val[nnz++] = (double)(lcg() % 1000) / 1000.0;
        }
    }
    row_ptr[n] = nnz;
    for (long j = 0; j < n; j++)
        x[j] = 1.0 + (double)(j % 7) * 0.125;

    for (long r = 0; r < reps; r++) {
#pragma omp parallel for schedule(dynamic, chunk)
        for (long i = 0; i < n; i++) {
            double s = 0.0;
            for (long k = row_ptr[i]; k < row_ptr[i + 1]; k++)
                s += val[k] * x[col[k]];
            y[i] = s; /* neighbouring rows -> same line of y */
        }
    }

    double sum = 0.0;
    for (long i = 0; i < n; i++)
        sum += y[i] * (double)(i % 13 + 1);
    printf("spmv N=%ld nnz=%ld reps=%ld checksum=%.17g\n", n, nnz, reps, sum);
    free(row_ptr); free(col); free(val); free(x); free(y);
    return 0;
}
