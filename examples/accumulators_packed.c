/*
 * accumulators_packed.c -- per-thread accumulators packed in one array.
 *
 * Demonstrates: false sharing between per-thread accumulator structs, the
 * Phoenix linear_regression pattern (thesis: false-sharing discussion,
 * cost model in §4.2).  Each thread sums over its static share of the
 * points into accs[t], a 32-byte struct; accs[0] and accs[1] lie in
 * the same 64-byte line, so the threads' updates keep invalidating each
 * other's copy of that line although no field is shared.  The accumulators
 * are accessed through a volatile pointer, so each update is a real load
 * and store (as in Phoenix, where the compiler could not keep them in
 * registers).  The fixed layout is in accumulators_padded.c.
 *
 * Usage: accumulators_packed [NPOINTS]   (default 1000000)
 * Output: the regression result; all sums are exact integers in doubles,
 * so it is identical for any thread count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define NTHREADS 64 /* maximum team size */

struct acc { double sum_x, sum_y, sum_xx, sum_xy; };   /* 32 bytes */
_Static_assert(sizeof(struct acc) == 32, "two accumulators per 64-byte line");
struct acc accs[NTHREADS] __attribute__((aligned(64))); /* packed */

struct point { unsigned char x, y; };

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    if (n < 2) {
        fprintf(stderr, "usage: %s [NPOINTS>=2]\n", argv[0]);
        return 2;
    }
    struct point *pts = malloc(sizeof(struct point) * n);
    if (!pts)
        return 2;
    unsigned long s = 42; /* fixed LCG: y ~ 0.5*x + 20 + noise */
    for (long i = 0; i < n; i++) {
        s = s * 6364136223846793005UL + 1442695040888963407UL;
        unsigned x = (unsigned)(s >> 33) % 256;
        pts[i].x = (unsigned char)x;
        pts[i].y = (unsigned char)(x / 2 + 20 + (unsigned)(s >> 20) % 16);
    }
    int nthreads = 1;

#pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
#pragma omp single
        nthreads = nt;
        if (nt <= NTHREADS) {
            long lo = n * t / nt, hi = n * (t + 1) / nt;
            volatile struct acc *a = &accs[t];
            for (long i = lo; i < hi; i++) {
                double x = pts[i].x, y = pts[i].y;
                a->sum_x += x;
                a->sum_y += y;
                a->sum_xx += x * x;
                a->sum_xy += x * y;
            }
        }
    }
    if (nthreads > NTHREADS) {
        fprintf(stderr, "at most %d threads supported\n", NTHREADS);
        return 2;
    }

    struct acc tot = {0, 0, 0, 0};
    for (int t = 0; t < nthreads; t++) {
        tot.sum_x += accs[t].sum_x;
        tot.sum_y += accs[t].sum_y;
        tot.sum_xx += accs[t].sum_xx;
        tot.sum_xy += accs[t].sum_xy;
    }
    double dn = (double)n;
    double slope = (dn * tot.sum_xy - tot.sum_x * tot.sum_y) /
                   (dn * tot.sum_xx - tot.sum_x * tot.sum_x);
    double icept = (tot.sum_y - slope * tot.sum_x) / dn;
    printf("linreg n=%ld SX=%.0f SY=%.0f SXX=%.0f SXY=%.0f slope=%.9f intercept=%.9f\n",
           n, tot.sum_x, tot.sum_y, tot.sum_xx, tot.sum_xy, slope, icept);
    free(pts);
    return 0;
}
