/*
 * jacobi_naive.c -- 2D Jacobi 5-point stencil, naive OpenMP version.
 *
 * Demonstrates: the straightforward parallel stencil from thesis §4.3.4
 * (naive version).  Two N x N double grids; each iteration every interior
 * point becomes the average of its four neighbours in the old grid
 * (`#pragma omp parallel for` over rows), then the grids are swapped.
 * Each sweep streams both whole grids through the cache, so for N large
 * enough that 2*N*N*8 bytes exceeds the cache, there is no reuse across
 * iterations.  Compare with jacobi_blocked.c (same result, temporal blocking).
 *
 * Usage: jacobi_naive [N [ITERS]]   (defaults N=1024, ITERS=20)
 * Output: a checksum that is bit-identical for any thread count and equal
 * to jacobi_blocked's for the same N and ITERS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

/* Must be the same expression as in jacobi_blocked.c (bit-exact results). */
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
    if (n < 3 || iters < 0) {
        fprintf(stderr, "usage: %s [N>=3 [ITERS>=0]]\n", argv[0]);
        return 2;
    }
    double *grid_a = malloc(sizeof(double) * n * n);
    double *grid_b = malloc(sizeof(double) * n * n);
    if (!grid_a || !grid_b)
        return 2;
    init(grid_a, n); /* boundary values live in both grids */
    init(grid_b, n);

    double *src = grid_a, *dst = grid_b;
    for (long t = 0; t < iters; t++) {
#pragma omp parallel for schedule(static)
        for (long i = 1; i < n - 1; i++)
            for (long j = 1; j < n - 1; j++)
                dst[i * n + j] = update(src, i, j, n);
        double *tmp = src; src = dst; dst = tmp;
    }

    double sum = 0.0; /* serial, fixed order: deterministic */
    for (long k = 0; k < n * n; k++)
        sum += src[k];
    printf("jacobi N=%ld iters=%ld checksum=%.17g center=%.17g\n",
           n, iters, sum, src[(n / 2) * n + n / 2]);
    free(grid_a);
    free(grid_b);
    return 0;
}
