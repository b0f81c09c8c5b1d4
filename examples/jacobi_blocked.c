/*
 * jacobi_blocked.c -- 2D Jacobi 5-point stencil with temporal cache blocking.
 *
 * Demonstrates: the cache-blocked variant of the thesis §4.3.4 stencil.
 * Same computation as jacobi_naive.c, but TB iterations are done per pass
 * over the grid using skewed ("wavefront") row tiles: tile b computes at
 * time step s (0-based within the pass) the rows
 *     [1 + b*B - s, 1 + (b+1)*B - s)
 * so each tile only depends on the tile before it.  A tile of B rows is
 * updated TB times while its (B+TB)*N*2 doubles are still in cache, instead
 * of the whole grid being streamed once per iteration.  Two grids suffice:
 * the value a tile overwrites (step s-2) is no longer needed by anyone (all
 * its readers at step s-1 are in this tile or earlier tiles).  Within a
 * tile step the rows are split among threads (`omp for`, implicit barrier).
 *
 * Usage: jacobi_blocked [N [ITERS [B [TB]]]]
 *        (defaults N=1024, ITERS=20, B=16 rows per tile, TB=4 steps per pass)
 * Output: bit-identical to jacobi_naive for the same N and ITERS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

/* Must be the same expression as in jacobi_naive.c (bit-exact results). */
static inline double update(const double *a, long i, long j, long n)
{
    return 0.25 * (a[(i - 1) * n + j] + a[(i + 1) * n + j] +
                   a[i * n + j - 1] + a[i * n + j + 1]);
}

static void init(double *a, long n)
{
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++)
            a[i * n + j] = (double)((i * 31 + j * 17) % 97) / 97.0;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1024;
    long iters = argc > 2 ? atol(argv[2]) : 20;
    long bs = argc > 3 ? atol(argv[3]) : 16;
    long tb = argc > 4 ? atol(argv[4]) : 4;
    if (n < 3 || iters < 0 || bs < 1 || tb < 1) {
        fprintf(stderr, "usage: %s [N>=3 [ITERS>=0 [B>=1 [TB>=1]]]]\n", argv[0]);
        return 2;
    }
    double *grid[2];
    grid[0] = malloc(sizeof(double) * n * n);
    grid[1] = malloc(sizeof(double) * n * n);
    if (!grid[0] || !grid[1])
        return 2;
    init(grid[0], n); /* boundary values live in both grids */
    init(grid[1], n);

#pragma omp parallel
    for (long t0 = 0; t0 < iters; t0 += tb) {       /* one pass = tsteps steps */
        long tsteps = iters - t0 < tb ? iters - t0 : tb;
        for (long b = 0; 1 + b * bs - (tsteps - 1) < n - 1; b++) {  /* tiles */
            for (long s = 0; s < tsteps; s++) {     /* time steps in the tile */
                const double *src = grid[(t0 + s) & 1];
                double *dst = grid[(t0 + s + 1) & 1];
                long lo = 1 + b * bs - s, hi = lo + bs;
                if (lo < 1) lo = 1;
                if (hi > n - 1) hi = n - 1;
#pragma omp for schedule(static)
                for (long i = lo; i < hi; i++)
                    for (long j = 1; j < n - 1; j++)
                        dst[i * n + j] = update(src, i, j, n);
            }
        }
    }

    const double *res = grid[iters & 1];
    double sum = 0.0; /* serial, fixed order: deterministic */
    for (long k = 0; k < n * n; k++)
        sum += res[k];
    printf("jacobi N=%ld iters=%ld checksum=%.17g center=%.17g\n",
           n, iters, sum, res[(n / 2) * n + n / 2]);
    free(grid[0]);
    free(grid[1]);
    return 0;
}
