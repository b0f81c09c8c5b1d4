/*
 * spmv_dynamic_padded.c -- spmv_dynamic.c with one cache line per element of y.
 *
 * Demonstrates: the fixed twin of spmv_dynamic.c that keeps its schedule.
 * Same matrix, same `#pragma omp parallel for schedule(dynamic, CHUNK)` over
 * the rows, same sums; only the layout of the output vector differs: row i
 * writes y[i*PAD], PAD = 8 doubles = 64 bytes, and y is line-aligned, so no
 * two rows share a line of y and there is no false sharing even with
 * CHUNK=1.  Comparing spmv_dynamic CHUNK with spmv_dynamic_padded CHUNK (same
 * CHUNK) separates the cost of false sharing on y from the cost of handing
 * out small chunks, which spmv_dynamic 1 vs 16 mixes.  The price is an 8x
 * larger y (64 bytes per row): keep N small enough that y stays in cache
 * (N=2000: 128 KiB) when timing the two against each other.
 *
 * Usage: spmv_dynamic_padded [CHUNK [N [REPS]]]   (defaults CHUNK=1, N=100000, REPS=10)
 * Output: the same line as spmv_dynamic with the same arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define EXTRA 2
#define LINE 64 /* cache-line size the arrays are aligned to */
#define PAD (LINE / sizeof(double)) /* y[i*PAD]: one line per row */

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
    /* Line-aligned arrays, sizes rounded up to whole lines, as in
     * spmv_dynamic.c; y has one line per row.  Each allocation is its own
     * call in main: the audit names heap blocks by allocation site. */
    long *row_ptr = aligned_alloc(LINE, line_bytes(sizeof(long) * (n + 1)));
    long *col = aligned_alloc(LINE, line_bytes(sizeof(long) * cap));
    double *val = aligned_alloc(LINE, line_bytes(sizeof(double) * cap));
    double *x = aligned_alloc(LINE, line_bytes(sizeof(double) * n));
    double *y = aligned_alloc(LINE, line_bytes(sizeof(double) * PAD * n));
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
            y[i * PAD] = s; /* each row its own line of y */
        }
    }

    double sum = 0.0;
    for (long i = 0; i < n; i++)
        sum += y[i * PAD] * (double)(i % 13 + 1);
    printf("spmv N=%ld nnz=%ld reps=%ld checksum=%.17g\n", n, nnz, reps, sum);
    free(row_ptr); free(col); free(val); free(x); free(y);
    return 0;
}
