/*
 * sync_bench.c -- the cost of OpenMP synchronization on this machine, for the
 * bandwidth model's runtime estimate (which otherwise charges nothing for
 * forking a parallel region or passing a barrier).
 *
 * Usage: sync_bench REPS TARGET_US
 *
 * Compiled with gcc -O2 -fopenmp (libgomp); cachescope runs it with
 * OMP_NUM_THREADS set to the CPUs it may use and the other OpenMP settings
 * (wait policy, spin count, binding, dynamic teams) removed from its
 * environment. Each repetition times, for about TARGET_US microseconds each:
 *
 *   barrier  `#pragma omp barrier` in a loop inside one parallel region: the
 *            time of one barrier episode, which every thread of the team spends
 *            (signalling and waking, with no thread late);
 *   region   empty `#pragma omp parallel` regions one after another: forking the
 *            team, the implicit barrier at the region's end, and joining.
 *
 * Output: "threads N" (the team that ran), then per repetition "rep barrier NS" and "rep region NS"
 * (nanoseconds per episode / per region). The iteration counts are sized once,
 * from an untimed run of each.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static double barriers(long n)
{
    double t0 = omp_get_wtime();
#pragma omp parallel
    {
        for (long i = 0; i < n; i++) {
#pragma omp barrier
        }
    }
    return omp_get_wtime() - t0;
}

static double regions(long n)
{
    double t0 = omp_get_wtime();
    for (long i = 0; i < n; i++) {
#pragma omp parallel
        {
            __asm__ volatile("" ::: "memory");
        }
    }
    return omp_get_wtime() - t0;
}

/* Iterations of `run` that take about `target` seconds (at least 16). */
static long sized(double (*run)(long), double target)
{
    long n = 16;
    for (;;) {
        double t = run(n);
        if (t >= target / 8 || n >= (1L << 30)) {
            double scaled = (double)n * target / (t > 0 ? t : 1e-9);
            return scaled < 16 ? 16 : (scaled > 1e9 ? 1000000000L : (long)scaled);
        }
        n *= 4;
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: sync_bench REPS TARGET_US\n");
        return 2;
    }
    int reps = atoi(argv[1]);
    double target = atof(argv[2]) * 1e-6;
    if (reps < 1 || !(target > 0)) {
        fprintf(stderr, "REPS must be at least 1 and TARGET_US positive\n");
        return 2;
    }
    /* The team that runs, which the environment or the runtime may have made smaller than
     * asked. */
    int team = 0;
#pragma omp parallel
    {
#pragma omp master
        team = omp_get_num_threads();
    }
    printf("threads %d\n", team);
    /* The team is created by the first region; sizing runs warm both kinds up. */
    long nb = sized(barriers, target);
    long nr = sized(regions, target);
    for (int r = 0; r < reps; r++) {
        double b = barriers(nb);
        double g = regions(nr);
        printf("rep barrier %.3f\n", b / (double)nb * 1e9);
        printf("rep region %.3f\n", g / (double)nr * 1e9);
    }
    return 0;
}
