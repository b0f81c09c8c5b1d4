/*
 * ipc_kernels.c -- the ordinary compiled loops whose instructions per cycle
 * become the machine model's `ipc` (`cachescope calibrate --bandwidth`,
 * docs/calibrate.md). Plain C, no intrinsics: what gcc -O2 makes of it is the
 * point. Every kernel works on L1-resident data (at most 16 KiB):
 *
 *   copy     c[i] = a[i]                      2 x 512 doubles
 *   scale    b[i] = s * c[i]                  2 x 512 doubles
 *   add      c[i] = a[i] + b[i]               3 x 512 doubles
 *   triad    a[i] = b[i] + s * c[i]           3 x 512 doubles
 *   dot      sum += a[i] * b[i]               2 x 512 doubles (a reduction)
 *   stencil  one Jacobi sweep, 5-point        2 x 32 x 32 doubles (grids swapped)
 *   modulo   h[i] = (k[i] * 2654435761 + i) % m, m not known at compile time
 *                                             2 x 1024 uint32
 *
 * Lengths are runtime values (`len`, `side`, `ilen`), as in ordinary programs
 * whose array sizes come from arguments or data. That matters: gcc 12 at -O2
 * vectorizes only loops whose trip count is a known multiple of the vector
 * width, so with a constant 512 it would vectorize copy, scale, add and triad,
 * which ordinary code with runtime sizes does not get (and which the tracer,
 * whose instrumented build stays scalar, would count at 2-2.5 x the native
 * instructions).
 *
 * The same source is built twice by calibrate: with `cachescope cc` (recorded,
 * for the instruction count in the tracer's unit) and with plain gcc (timed).
 *
 * Usage:
 *   ipc_kernels count KERNEL REPS
 *       runs KERNEL REPS times and prints nothing (the recorded run: the
 *       difference of two REPS cancels the setup).
 *   ipc_kernels time KERNEL ROUNDS TARGET_US [REPS CLOCK_ITERS]
 *       pinned to the first usable CPU; after a warm-up, sizes the kernel calls
 *       (REPS) and the clock iterations per slice so that a slice takes about
 *       TARGET_US / 16 (unless given: calibrate sizes once per kernel and passes
 *       the sizes to the later invocations); then ROUNDS rounds of 8 slices of
 *       the kernel alternating with 8 slices of a dependent add chain (the clock,
 *       1 cycle per add, 1000 adds per iteration), all in thread CPU time. Per
 *       round it prints
 *         rep REPS SECONDS CLOCK_ADDS CLOCK_SECONDS
 *       REPS kernel calls took SECONDS in the fastest kernel slice; CLOCK_ADDS
 *       adds took CLOCK_SECONDS in the fastest clock slice.
 * Errors go to stderr with exit status 2 (usage) or 3 (system).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 512
#define G 32
#define NI 1024
#define SLICES 8

/* The data is global, not static: the compiler must assume other code reads the
 * results and may change `scalar` and `modulus`, so no store is dead and no operand a
 * constant. Offsets keep a store and the next loads from sharing their address bits
 * below 4 KiB (no false store-to-load dependence). */
double mem[3 * N + 16] __attribute__((aligned(4096)));
#define A (mem)
#define B (mem + N + 8)
#define C (mem + 2 * N + 16)
double grid[2 * G * G + 8] __attribute__((aligned(64)));
uint32_t keys[NI] __attribute__((aligned(64)));
uint32_t hashes[NI + 16] __attribute__((aligned(64)));
double *src = grid, *dst = grid + G * G + 8;
double scalar = 0.5;
uint32_t modulus = 1021;
/* Lengths are runtime values, as in ordinary programs (sizes from arguments or data). */
int len = N, side = G, ilen = NI;
static volatile double sink;
static volatile uint32_t isink;

#define KERNEL __attribute__((noinline, noipa))

KERNEL static void copy(void)
{
    int n = len;
    for (int i = 0; i < n; i++)
        C[i] = A[i];
}

KERNEL static void scale(void)
{
    int n = len;
    double s = scalar;
    for (int i = 0; i < n; i++)
        B[i] = s * C[i];
}

KERNEL static void add(void)
{
    int n = len;
    for (int i = 0; i < n; i++)
        C[i] = A[i] + B[i];
}

KERNEL static void triad(void)
{
    int n = len;
    double s = scalar;
    for (int i = 0; i < n; i++)
        A[i] = B[i] + s * C[i];
}

KERNEL static double dot(void)
{
    int n = len;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += A[i] * B[i];
    return sum;
}

KERNEL static void stencil(void)
{
    int g = side;
    for (int i = 1; i < g - 1; i++)
        for (int j = 1; j < g - 1; j++)
            dst[i * g + j] = 0.25 * (src[(i - 1) * g + j] + src[(i + 1) * g + j] +
                                     src[i * g + j - 1] + src[i * g + j + 1]);
    double *t = src;
    src = dst;
    dst = t;
}

KERNEL static void modulo(void)
{
    int n = ilen;
    uint32_t m = modulus;
    for (int i = 0; i < n; i++)
        hashes[i] = (keys[i] * 2654435761u + (uint32_t)i) % m;
}

static void run(int k, long reps)
{
    for (long r = 0; r < reps; r++) {
        switch (k) {
        case 0: copy(); break;
        case 1: scale(); break;
        case 2: add(); break;
        case 3: triad(); break;
        case 4: sink = dot(); break;
        case 5: stencil(); break;
        default: modulo(); break;
        }
        __asm__ volatile("" ::: "memory");
    }
}

static const char *const names[] = {"copy", "scale", "add", "triad", "dot", "stencil", "modulo"};
#define KERNELS (int)(sizeof names / sizeof names[0])

static double cputime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double kernel_s(int k, long reps)
{
    double t0 = cputime();
    run(k, reps);
    return cputime() - t0;
}

#define CHAIN_ADDS 1000.0

/* The same clock as bandwidth_bench.c: 1000 dependent register adds per iteration. */
static double clock_s(long iters)
{
    long acc = 0, inc = 1, n = iters;
    double t0 = cputime();
    __asm__ volatile("1:\n\t"
                     ".rept 1000\n\t"
                     "add %[inc], %[acc]\n\t"
                     ".endr\n\t"
                     "dec %[n]\n\t"
                     "jnz 1b"
                     : [acc] "+r"(acc), [n] "+r"(n)
                     : [inc] "r"(inc)
                     : "cc");
    double t1 = cputime();
    isink = (uint32_t)acc;
    return t1 - t0;
}

/* How many units make one call of f last about `target` seconds. */
static long size_work(double (*f)(int, long), int k, double target)
{
    long work = 1;
    double s = f(k, work);
    while (s < target / 8 && work < (1L << 40)) {
        work *= 2;
        s = f(k, work);
    }
    double scaled = work * target / (s > 1e-9 ? s : 1e-9);
    return scaled < 1 ? 1 : (long)scaled;
}

static double clock_k(int k, long iters)
{
    (void)k;
    return clock_s(iters);
}

static void init(void)
{
    for (int i = 0; i < 3 * N + 16; i++)
        mem[i] = 1.0 + (i % 7) * 0.125;
    for (int i = 0; i < 2 * G * G + 8; i++)
        grid[i] = (double)((i * 31) % 97) / 97.0;
    for (int i = 0; i < NI; i++)
        keys[i] = (uint32_t)i * 40503u + 17u;
}

static long parse_long(const char *s)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || *end || v < 1 ? -1 : v;
}

int main(int argc, char **argv)
{
    int k = -1;
    if (argc >= 3)
        for (int i = 0; i < KERNELS; i++)
            if (strcmp(argv[2], names[i]) == 0)
                k = i;
    int count = argc == 4 && strcmp(argv[1], "count") == 0;
    int timed = (argc == 5 || argc == 7) && strcmp(argv[1], "time") == 0;
    if (k < 0 || !(count || timed)) {
        fprintf(stderr,
                "usage: %s count KERNEL REPS | time KERNEL ROUNDS TARGET_US [REPS CLOCK_ITERS] "
                "(KERNEL: copy scale add triad dot stencil modulo)\n",
                argv[0]);
        return 2;
    }
    long reps = parse_long(argv[3]);
    long target_us = timed ? parse_long(argv[4]) : 1;
    long work = argc == 7 ? parse_long(argv[5]) : 0;
    long clock_work = argc == 7 ? parse_long(argv[6]) : 0;
    if (reps < 0 || target_us < 0 || work < 0 || clock_work < 0) {
        fprintf(stderr, "REPS, ROUNDS, TARGET_US and CLOCK_ITERS must be positive integers\n");
        return 2;
    }
    init();
    if (count) {
        run(k, reps);
        return 0;
    }

    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        fprintf(stderr, "sched_getaffinity: %s\n", strerror(errno));
        return 3;
    }
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed)) {
            CPU_SET(c, &one);
            break;
        }
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
        fprintf(stderr, "sched_setaffinity: %s\n", strerror(errno));
        return 3;
    }
    double slice = target_us * 1e-6 / (2 * SLICES);
    run(k, 100); /* warm-up: data in L1, code in the caches, predictors trained */
    if (!work)
        work = size_work(kernel_s, k, slice);
    if (!clock_work)
        clock_work = size_work(clock_k, k, slice);
    clock_s(clock_work); /* one untimed slice of each */
    kernel_s(k, work);
    for (long r = 0; r < reps; r++) {
        /* The fastest slice of each: interference only ever slows a slice down. */
        double best = 1e30, best_clock = 1e30;
        for (int i = 0; i < SLICES; i++) {
            double c = clock_s(clock_work);
            double s = kernel_s(k, work);
            best_clock = c < best_clock ? c : best_clock;
            best = s < best ? s : best;
        }
        printf("rep %ld %.9f %.0f %.9f\n", work, best, clock_work * CHAIN_ADDS, best_clock);
        fflush(stdout);
    }
    return 0;
}
