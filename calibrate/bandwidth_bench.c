/*
 * bandwidth_bench.c -- measures this machine's limits for the bandwidth model
 * (thesis section 4.3-4.4, Table 4.3: "the limitations were determined with
 * micro-benchmarks"). x86-64 only (SSE2 intrinsics, inline assembly).
 *
 * Usage: bandwidth_bench REPS TARGET_US TASK...
 *
 * Every task is set up once (buffers allocated and touched by the threads that
 * use them, each thread pinned to its CPU), run once untimed and sized so that
 * one repetition takes about TARGET_US microseconds. Then REPS rounds run every
 * task once each, in the order given: the repetitions of one task are spread
 * over the whole run, so a burst of other load on the machine spoils some
 * repetitions of every task instead of all repetitions of one. Tasks:
 *
 *   read:BYTES:THREADS   stream of 16-byte SSE2 loads (pxor into accumulators,
 *   write:BYTES:THREADS  8 per 128 bytes) or of 16-byte SSE2 stores (movaps,
 *                        ordinary, not non-temporal) over a buffer of BYTES per
 *                        thread, round and round; THREADS 0 = one thread per CPU
 *                        this process may use. Each thread is pinned to its own
 *                        CPU and makes one untimed pass; then all start together
 *                        (spin after a barrier) and stream until thread 0 has
 *                        seen TARGET_US pass (checked after each MiB of traffic)
 *                        and raised the stop flag. So all threads stream during
 *                        the same window, even when one of them was descheduled
 *                        for a while. COUNT = bytes loaded or stored by all
 *                        threads; SECONDS = one thread: its CPU time (time it was
 *                        descheduled does not count); several: first start to last
 *                        end (the window they shared).
 *   copy:BYTES:THREADS   the same with a copy: 16-byte SSE2 loads from the first
 *                        half of the buffer (A), stores (ordinary) of the loaded
 *                        values to the second half (B), BYTES / 2 each, B offset
 *                        by 1088 bytes (no 4 KiB aliasing between a load and a
 *                        store). COUNT = bytes copied (loaded = stored).
 *   fault:BYTES          first touch of fresh anonymous memory: mmap BYTES
 *                        (MAP_PRIVATE | MAP_ANONYMOUS, not populated),
 *                        madvise(MADV_NOHUGEPAGE) so every 4 KiB page faults on
 *                        its own, write one byte per 4 KiB page, munmap; on the
 *                        first CPU. COUNT = pages; SECONDS = thread CPU time of
 *                        the touching loop (the faults run in the kernel on the
 *                        thread's behalf, so they count; descheduled time does
 *                        not), the munmap excluded.
 *   c2c:BYTES            two threads on the first two CPUs pass a block of BYTES
 *                        back and forth: A stores the whole block and raises a
 *                        flag; B loads the whole block (each line comes out of A's
 *                        cache), checks it and lowers the flag; and so on.
 *                        COUNT = bytes B loaded; SECONDS = time B spent loading
 *                        (rounds x the median round's loading time); SECONDS2 =
 *                        total time of the rounds.
 *   clock                a dependent chain of register adds (1 cycle each);
 *                        COUNT = adds.
 *   ipc                  an L1-resident loop of 8 instructions per element (2 loads,
 *                        addsd, mulsd, store, add, cmp, jne), in asm so the count is
 *                        exact; COUNT = instructions. (The JSON's ipc_throughput_loop;
 *                        the model's ipc comes from the compiled kernels of
 *                        ipc_kernels.c.)
 *   adds                 8 independent chains of register adds; COUNT = instructions.
 *   flops                7 independent addpd and 7 independent mulpd chains (SSE2,
 *                        2 doubles each); COUNT = flops.
 *   ipc, adds and flops alternate 8 slices of the kernel with 8 slices of the clock
 *   chain, each about TARGET_US / 16: COUNT in SECONDS is the fastest kernel slice,
 *   CLOCK_ADDS in CLOCK_SECONDS the fastest clock slice (the clock while the kernel ran).
 *   clock, ipc, adds and flops are timed in thread CPU time.
 *
 * Output (stdout):
 *   cpus C0 C1 ...                 CPUs the process may use (threads are pinned to them)
 *   rep TASK COUNT SECONDS [SECONDS2 | CLOCK_ADDS CLOCK_SECONDS]
 *                                  one line per timed repetition of task number TASK (0-based)
 *   skip TASK REASON...            a task that cannot run here (then no rep lines for it)
 * Errors go to stderr with exit status 2 (usage) or 3 (system).
 * Compiled by `cachescope calibrate --bandwidth` with gcc -O2 -pthread
 * -fno-tree-loop-distribute-patterns (the loops stay loops, no memset calls).
 */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MAX_CPUS 1024
#define MAX_TASKS 64
#define SLICES 8

static int ncpus;
static int cpus[MAX_CPUS];
static int reps;
static double target_s;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread: unlike the wall clock it does not advance while the
 * thread is descheduled (another process on its CPU; with steal-time accounting, the
 * host running something else on the vCPU). */
static double cputime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, strerror(errno));
    exit(3);
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        die("sched_setaffinity");
}

static void *alloc(size_t bytes)
{
    size_t align = bytes >= (2u << 20) ? (2u << 20) : 4096;
    size_t rounded = (bytes + align - 1) / align * align;
    void *p = aligned_alloc(align, rounded);
    if (!p) {
        errno = ENOMEM;
        die("aligned_alloc");
    }
    memset(p, 1, rounded); /* first touch by the thread that uses it */
    return p;
}

/* Defeats dead-code elimination of the read streams. */
static volatile long sink;

/* ---------------------------------------------------------------- streams */

/* `passes` times over n16 16-byte chunks (n16 a multiple of 8): loads only. */
static __attribute__((noinline)) long read_stream(const __m128i *p, size_t n16, long passes)
{
    __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
    for (long r = 0; r < passes; r++) {
        for (size_t i = 0; i < n16; i += 8) {
            a0 = _mm_xor_si128(a0, _mm_load_si128(p + i));
            a1 = _mm_xor_si128(a1, _mm_load_si128(p + i + 1));
            a2 = _mm_xor_si128(a2, _mm_load_si128(p + i + 2));
            a3 = _mm_xor_si128(a3, _mm_load_si128(p + i + 3));
            a0 = _mm_xor_si128(a0, _mm_load_si128(p + i + 4));
            a1 = _mm_xor_si128(a1, _mm_load_si128(p + i + 5));
            a2 = _mm_xor_si128(a2, _mm_load_si128(p + i + 6));
            a3 = _mm_xor_si128(a3, _mm_load_si128(p + i + 7));
        }
        __asm__ volatile("" ::: "memory");
    }
    __m128i a = _mm_xor_si128(_mm_xor_si128(a0, a1), _mm_xor_si128(a2, a3));
    return _mm_cvtsi128_si64(a);
}

/* `passes` times over n16 16-byte chunks: stores only (ordinary, not non-temporal). */
static __attribute__((noinline)) void write_stream(__m128i *p, size_t n16, long passes, long seed)
{
    for (long r = 0; r < passes; r++) {
        __m128i v = _mm_set1_epi64x(seed + r);
        for (size_t i = 0; i < n16; i += 8) {
            _mm_store_si128(p + i, v);
            _mm_store_si128(p + i + 1, v);
            _mm_store_si128(p + i + 2, v);
            _mm_store_si128(p + i + 3, v);
            _mm_store_si128(p + i + 4, v);
            _mm_store_si128(p + i + 5, v);
            _mm_store_si128(p + i + 6, v);
            _mm_store_si128(p + i + 7, v);
        }
        __asm__ volatile("" ::: "memory");
    }
}

/* `passes` times over n16 16-byte chunks: loads from src, stores of the loaded values
 * to dst (ordinary stores). */
static __attribute__((noinline)) void copy_stream(__m128i *dst, const __m128i *src, size_t n16,
                                                  long passes)
{
    for (long r = 0; r < passes; r++) {
        for (size_t i = 0; i < n16; i += 8) {
            __m128i v0 = _mm_load_si128(src + i), v1 = _mm_load_si128(src + i + 1);
            __m128i v2 = _mm_load_si128(src + i + 2), v3 = _mm_load_si128(src + i + 3);
            __m128i v4 = _mm_load_si128(src + i + 4), v5 = _mm_load_si128(src + i + 5);
            __m128i v6 = _mm_load_si128(src + i + 6), v7 = _mm_load_si128(src + i + 7);
            _mm_store_si128(dst + i, v0);
            _mm_store_si128(dst + i + 1, v1);
            _mm_store_si128(dst + i + 2, v2);
            _mm_store_si128(dst + i + 3, v3);
            _mm_store_si128(dst + i + 4, v4);
            _mm_store_si128(dst + i + 5, v5);
            _mm_store_si128(dst + i + 6, v6);
            _mm_store_si128(dst + i + 7, v7);
        }
        __asm__ volatile("" ::: "memory");
    }
}

/* Copy buffers: B starts this far after the end of A. */
#define COPY_GAP 1088

enum kind { READ, WRITE, COPY, FAULT, C2C, CLOCK, IPC, ADDS, FLOPS };

struct team;

struct member {
    struct team *team;
    int cpu;
    double start_s, end_s;
    double cpu_s; /* CPU time of the timed part */
    double bytes; /* streams: bytes loaded or stored */
    double aux_s; /* c2c: time spent loading */
};

struct team {
    enum kind kind;
    int n;
    size_t bytes;       /* per thread (streams) or block size (c2c) */
    long work;          /* c2c: rounds; < 0: quit */
    pthread_barrier_t bar;
    int ready;          /* spin start */
    int stop __attribute__((aligned(64))); /* streams: time is up */
    long flag __attribute__((aligned(64))); /* c2c hand-over */
    __m128i *block;     /* c2c: the shared block */
    pthread_t *threads;
    struct member m[];
};

static void spin_start(struct team *t)
{
    __atomic_add_fetch(&t->ready, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&t->ready, __ATOMIC_ACQUIRE) < t->n)
        _mm_pause();
}

static void wait_flag(long *flag, long want)
{
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != want)
        _mm_pause();
}

/* Streams over the buffer until the stop flag is raised (thread 0 raises it after
 * target_s); returns the bytes loaded or stored. The flag and the clock are checked
 * after each MiB of traffic: whole passes over buffers up to 1 MiB, 1 MiB pieces of
 * larger ones. */
static double stream_until_stop(struct team *t, int id, __m128i *buf, long *seed)
{
    const size_t unit16 = (1u << 20) / 16;
    size_t n16 = t->kind == COPY ? t->bytes / 32 : t->bytes / 16;
    __m128i *copy_dst = buf + n16 + COPY_GAP / 16;
    size_t piece = n16 < unit16 ? n16 : unit16;
    long passes = n16 < unit16 ? (long)(unit16 / n16) : 1;
    double deadline = now() + target_s;
    double bytes = 0.0;
    size_t pos = 0;
    for (;;) {
        size_t len = pos + piece > n16 ? n16 - pos : piece;
        if (t->kind == WRITE) {
            write_stream(buf + pos, len, passes, *seed);
            *seed += passes;
        } else if (t->kind == COPY) {
            copy_stream(copy_dst + pos, buf + pos, len, passes);
        } else {
            sink += read_stream(buf + pos, len, passes);
        }
        bytes += (double)len * 16.0 * passes;
        pos = pos + len >= n16 ? 0 : pos + len;
        if (id == 0 && now() >= deadline)
            __atomic_store_n(&t->stop, 1, __ATOMIC_RELEASE);
        if (__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE))
            return bytes;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Loading time of B over all rounds is taken as rounds x the median round's: a round
 * in which B was descheduled (milliseconds, against microseconds for a block) would
 * otherwise dominate the sum. */
static void c2c_rounds(struct team *t, int id, long rounds, struct member *me)
{
    size_t n16 = t->bytes / 16;
    __m128i *p = t->block;
    double *phase = NULL;
    if (id == 1 && !(phase = malloc(rounds * sizeof *phase)))
        die("malloc");
    for (long r = 1; r <= rounds; r++) {
        if (id == 0) {
            wait_flag(&t->flag, 2 * r - 2);
            write_stream(p, n16, 1, r);
            __atomic_store_n(&t->flag, 2 * r - 1, __ATOMIC_RELEASE);
        } else {
            wait_flag(&t->flag, 2 * r - 1);
            double t0 = now();
            long x = read_stream(p, n16, 1);
            double t1 = now();
            phase[r - 1] = t1 - t0;
            sink += x;
            if (_mm_cvtsi128_si64(_mm_load_si128(p)) != r) {
                fprintf(stderr, "c2c: round %ld read stale data\n", r);
                exit(3);
            }
            __atomic_store_n(&t->flag, 2 * r, __ATOMIC_RELEASE);
        }
    }
    if (id == 1) {
        qsort(phase, rounds, sizeof *phase, cmp_double);
        me->aux_s = rounds * (rounds % 2 ? phase[rounds / 2]
                                         : (phase[rounds / 2 - 1] + phase[rounds / 2]) / 2);
        free(phase);
    }
}

static void *member_main(void *arg)
{
    struct member *me = arg;
    struct team *t = me->team;
    int id = (int)(me - t->m);
    pin(me->cpu);
    __m128i *buf = t->kind == C2C ? NULL
                   : t->kind == COPY ? alloc(t->bytes + COPY_GAP)
                                     : alloc(t->bytes);
    size_t n16 = t->bytes / 16;
    long seed = 0;
    pthread_barrier_wait(&t->bar); /* buffers ready */
    for (;;) {
        pthread_barrier_wait(&t->bar); /* command */
        long work = t->work;
        if (work < 0)
            break;
        /* One untimed pass: the data is back in the level being measured. */
        if (t->kind == READ)
            sink += read_stream(buf, n16, 1);
        else if (t->kind == WRITE)
            write_stream(buf, n16, 1, seed++);
        else if (t->kind == COPY)
            copy_stream(buf + n16 / 2 + COPY_GAP / 16, buf, n16 / 2, 1);
        spin_start(t);
        me->start_s = now();
        double cpu0 = cputime();
        if (t->kind == C2C)
            c2c_rounds(t, id, work, me);
        else
            me->bytes = stream_until_stop(t, id, buf, &seed);
        me->cpu_s = cputime() - cpu0;
        me->end_s = now();
        pthread_barrier_wait(&t->bar); /* done */
    }
    if (buf) {
        sink += ((volatile char *)buf)[t->bytes - 1];
        free(buf);
    }
    return NULL;
}

static struct team *team_new(enum kind kind, int n, size_t bytes)
{
    size_t size = (sizeof(struct team) + n * sizeof(struct member) + 63) / 64 * 64;
    struct team *t = aligned_alloc(64, size);
    if (!t)
        die("aligned_alloc");
    memset(t, 0, size);
    t->kind = kind;
    t->n = n;
    t->bytes = bytes;
    if (kind == C2C)
        t->block = alloc(bytes);
    if (pthread_barrier_init(&t->bar, NULL, n + 1) != 0)
        die("pthread_barrier_init");
    t->threads = calloc(n, sizeof *t->threads);
    if (!t->threads)
        die("calloc");
    for (int i = 0; i < n; i++) {
        t->m[i].team = t;
        t->m[i].cpu = cpus[i];
        errno = pthread_create(&t->threads[i], NULL, member_main, &t->m[i]);
        if (errno)
            die("pthread_create");
    }
    pthread_barrier_wait(&t->bar);
    return t;
}

/* One run of `work` (streams: of target_s); returns the wall time, first start to
 * last end. `aux`: c2c loading time or the streams' bytes. */
static double team_run(struct team *t, long work, double *aux)
{
    t->work = work;
    t->ready = 0;
    t->stop = 0;
    t->flag = 0;
    pthread_barrier_wait(&t->bar);
    pthread_barrier_wait(&t->bar);
    double first = t->m[0].start_s, last = t->m[0].end_s;
    for (int i = 1; i < t->n; i++) {
        if (t->m[i].start_s < first)
            first = t->m[i].start_s;
        if (t->m[i].end_s > last)
            last = t->m[i].end_s;
    }
    if (aux && t->kind == C2C) {
        *aux = t->m[t->n - 1].aux_s;
    } else if (aux) {
        *aux = 0.0;
        for (int i = 0; i < t->n; i++)
            *aux += t->m[i].bytes;
    }
    /* One thread: the time it ran. Several: the common window, so that the total is
     * what they achieve together. */
    if (t->n == 1 && t->kind != C2C)
        return t->m[0].cpu_s;
    return last - first;
}

static void team_end(struct team *t)
{
    t->work = -1;
    pthread_barrier_wait(&t->bar);
    for (int i = 0; i < t->n; i++)
        pthread_join(t->threads[i], NULL);
    pthread_barrier_destroy(&t->bar);
    free(t->block);
    free(t->threads);
    free(t);
}

/* ------------------------------------------------------- core kernels */

#define CHAIN_ADDS 1000.0

static double clock_run(long iters)
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
    sink += acc;
    return t1 - t0;
}

#define IPC_N 512 /* doubles per array: 3 x 4 KiB, L1-resident */
/* The arrays are 4 KiB + 64 and 8 KiB + 128 bytes apart, so a store and the loads
 * of the next elements never have the same address bits below 4 KiB (no false
 * store-to-load dependence through partial address comparison). */
static double ipc_mem[3 * IPC_N + 16] __attribute__((aligned(4096)));
#define IPC_A (ipc_mem)
#define IPC_B (ipc_mem + IPC_N + 8)
#define IPC_C (ipc_mem + 2 * IPC_N + 16)

/* Instructions per pass: 1 (xor) + 8 per element + 2 (dec, jnz). */
#define IPC_PER_PASS (8.0 * IPC_N + 3.0)

static double ipc_run(long passes)
{
    long n = passes;
    const double half = 0.5;
    double t0 = cputime();
    __asm__ volatile("movsd %[half], %%xmm2\n\t"
                     "2:\n\t"
                     "xor %%rax, %%rax\n\t"
                     "1:\n\t"
                     "movsd (%[a],%%rax), %%xmm0\n\t"
                     "movsd (%[b],%%rax), %%xmm1\n\t"
                     "addsd %%xmm1, %%xmm0\n\t"
                     "mulsd %%xmm2, %%xmm0\n\t"
                     "movsd %%xmm0, (%[c],%%rax)\n\t"
                     "add $8, %%rax\n\t"
                     "cmp %[end], %%rax\n\t"
                     "jne 1b\n\t"
                     "dec %[n]\n\t"
                     "jnz 2b"
                     : [n] "+r"(n)
                     : [a] "r"(IPC_A), [b] "r"(IPC_B), [c] "r"(IPC_C),
                       [end] "r"((long)(IPC_N * sizeof(double))), [half] "m"(half)
                     : "rax", "xmm0", "xmm1", "xmm2", "cc", "memory");
    double t1 = cputime();
    return t1 - t0;
}

/* Instructions per iteration: 8 x 25 adds + dec + jnz. */
#define ADDS_PER_ITER 202.0

static double adds_run(long iters)
{
    long a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0, n = iters, inc = 1;
    double t0 = cputime();
    __asm__ volatile("1:\n\t"
                     ".rept 25\n\t"
                     "add %[inc], %[a0]\n\t"
                     "add %[inc], %[a1]\n\t"
                     "add %[inc], %[a2]\n\t"
                     "add %[inc], %[a3]\n\t"
                     "add %[inc], %[a4]\n\t"
                     "add %[inc], %[a5]\n\t"
                     "add %[inc], %[a6]\n\t"
                     "add %[inc], %[a7]\n\t"
                     ".endr\n\t"
                     "dec %[n]\n\t"
                     "jnz 1b"
                     : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),
                       [a4] "+r"(a4), [a5] "+r"(a5), [a6] "+r"(a6), [a7] "+r"(a7), [n] "+r"(n)
                     : [inc] "r"(inc)
                     : "cc");
    double t1 = cputime();
    sink += a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
    return t1 - t0;
}

/* Flops per iteration: 10 x (7 addpd + 7 mulpd) x 2 lanes. */
#define FLOPS_PER_ITER 280.0

static double flops_run(long iters)
{
    static const double one[2] __attribute__((aligned(16))) = {1.0, 1.0};
    long n = iters;
    double t0 = cputime();
    __asm__ volatile("movapd %[one], %%xmm14\n\t"
                     "movapd %[one], %%xmm15\n\t"
                     "movapd %%xmm14, %%xmm0\n\t"
                     "movapd %%xmm14, %%xmm1\n\t"
                     "movapd %%xmm14, %%xmm2\n\t"
                     "movapd %%xmm14, %%xmm3\n\t"
                     "movapd %%xmm14, %%xmm4\n\t"
                     "movapd %%xmm14, %%xmm5\n\t"
                     "movapd %%xmm14, %%xmm6\n\t"
                     "movapd %%xmm14, %%xmm7\n\t"
                     "movapd %%xmm14, %%xmm8\n\t"
                     "movapd %%xmm14, %%xmm9\n\t"
                     "movapd %%xmm14, %%xmm10\n\t"
                     "movapd %%xmm14, %%xmm11\n\t"
                     "movapd %%xmm14, %%xmm12\n\t"
                     "movapd %%xmm14, %%xmm13\n\t"
                     "1:\n\t"
                     ".rept 10\n\t"
                     "addpd %%xmm14, %%xmm0\n\t"
                     "mulpd %%xmm15, %%xmm7\n\t"
                     "addpd %%xmm14, %%xmm1\n\t"
                     "mulpd %%xmm15, %%xmm8\n\t"
                     "addpd %%xmm14, %%xmm2\n\t"
                     "mulpd %%xmm15, %%xmm9\n\t"
                     "addpd %%xmm14, %%xmm3\n\t"
                     "mulpd %%xmm15, %%xmm10\n\t"
                     "addpd %%xmm14, %%xmm4\n\t"
                     "mulpd %%xmm15, %%xmm11\n\t"
                     "addpd %%xmm14, %%xmm5\n\t"
                     "mulpd %%xmm15, %%xmm12\n\t"
                     "addpd %%xmm14, %%xmm6\n\t"
                     "mulpd %%xmm15, %%xmm13\n\t"
                     ".endr\n\t"
                     "dec %[n]\n\t"
                     "jnz 1b"
                     : [n] "+r"(n)
                     : [one] "m"(one)
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc");
    double t1 = cputime();
    return t1 - t0;
}

/* ---------------------------------------------------------------- page faults */

/* Writes one byte per 4 KiB page of a fresh anonymous mapping of `bytes`; returns the
 * thread CPU time of the touching loop. Transparent huge pages are turned off for the
 * mapping: with them one fault may map 2 MiB (512 pages for one fault and one 2 MiB
 * clear), and whether it does depends on the system's THP setting, alignment and free
 * huge pages, not on the program. */
static double fault_run(size_t bytes)
{
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("mmap");
    if (madvise(p, bytes, MADV_NOHUGEPAGE) != 0)
        die("madvise(MADV_NOHUGEPAGE)");
    double t0 = cputime();
    for (size_t i = 0; i < bytes; i += 4096)
        ((volatile char *)p)[i] = 1;
    double t1 = cputime();
    if (munmap(p, bytes) != 0)
        die("munmap");
    return t1 - t0;
}

/* ---------------------------------------------------------------- tasks */

struct task {
    enum kind kind;
    size_t bytes;
    int threads;
    int skip;
    struct team *team;
    long work;       /* per repetition (core kernels: per slice) */
    long clock_work; /* core kernels: clock iterations per slice */
};

static double (*kernel_of(enum kind k))(long)
{
    switch (k) {
    case CLOCK:
        return clock_run;
    case IPC:
        return ipc_run;
    case ADDS:
        return adds_run;
    default:
        return flops_run;
    }
}

static double count_per_unit(enum kind k)
{
    switch (k) {
    case CLOCK:
        return CHAIN_ADDS;
    case IPC:
        return IPC_PER_PASS;
    case ADDS:
        return ADDS_PER_ITER;
    default:
        return FLOPS_PER_ITER;
    }
}

static double run_task(struct task *t, long work, double *aux)
{
    if (t->team)
        return team_run(t->team, work, aux);
    return kernel_of(t->kind)(work);
}

/* How much work makes one run last about `target` (doubling, then scaling). */
static long size_work(struct task *t, double target)
{
    long work = 1;
    double s = run_task(t, work, NULL);
    while (s < target / 8 && work < (1L << 40)) {
        work *= 2;
        s = run_task(t, work, NULL);
    }
    double scaled = work * target / (s > 1e-9 ? s : 1e-9);
    return scaled < 1 ? 1 : (long)scaled;
}

static void setup(int id, struct task *t)
{
    if (t->kind == C2C && ncpus < 2) {
        printf("skip %d needs two CPUs, this process may use %d\n", id, ncpus);
        t->skip = 1;
        return;
    }
    if (t->kind == FAULT) {
        pin(cpus[0]);
        fault_run(t->bytes); /* warm-up: the kernel's free lists, a VM host's backing */
        return;
    }
    if (t->kind == READ || t->kind == WRITE || t->kind == COPY || t->kind == C2C) {
        int n = t->kind == C2C ? 2 : (t->threads == 0 ? ncpus : t->threads);
        if (n > ncpus) {
            printf("skip %d needs %d CPUs, this process may use %d\n", id, n, ncpus);
            t->skip = 1;
            return;
        }
        t->team = team_new(t->kind, n, t->bytes);
        team_run(t->team, 16, NULL); /* warm-up */
        if (t->kind == C2C)
            t->work = size_work(t, target_s);
    } else {
        pin(cpus[0]);
        run_task(t, 100, NULL); /* warm-up */
        if (t->kind == CLOCK) {
            t->work = size_work(t, target_s);
        } else {
            struct task clock = {.kind = CLOCK};
            t->work = size_work(t, target_s / (2 * SLICES));
            t->clock_work = size_work(&clock, target_s / (2 * SLICES));
        }
    }
}

static void rep(int id, struct task *t)
{
    if (t->skip)
        return;
    if (t->team) {
        double aux = 0.0;
        double s = team_run(t->team, t->work, &aux);
        if (t->kind == C2C)
            printf("rep %d %.0f %.9f %.9f\n", id, (double)t->work * (double)t->bytes, aux, s);
        else
            printf("rep %d %.0f %.9f\n", id, aux, s);
    } else if (t->kind == FAULT) {
        pin(cpus[0]);
        double s = fault_run(t->bytes);
        printf("rep %d %.0f %.9f\n", id, (double)(t->bytes / 4096), s);
    } else if (t->kind == CLOCK) {
        double s = clock_run(t->work);
        printf("rep %d %.0f %.9f\n", id, (double)t->work * CHAIN_ADDS, s);
    } else {
        /* The fastest slice of each: interference (other load, a descheduled vCPU)
         * only ever slows a slice down. */
        double s = 1e30, clock_s = 1e30;
        double (*kernel)(long) = kernel_of(t->kind);
        for (int i = 0; i < SLICES; i++) {
            double c = clock_run(t->clock_work);
            double k = kernel(t->work);
            clock_s = c < clock_s ? c : clock_s;
            s = k < s ? k : s;
        }
        printf("rep %d %.0f %.9f %.0f %.9f\n", id, (double)t->work * count_per_unit(t->kind), s,
               (double)t->clock_work * CHAIN_ADDS, clock_s);
    }
    fflush(stdout);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v == 0 || v % 128 != 0)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_task(const char *arg, struct task *t)
{
    char kind[16], size_s[32];
    int threads = 0;
    memset(t, 0, sizeof *t);
    if (strcmp(arg, "clock") == 0)
        t->kind = CLOCK;
    else if (strcmp(arg, "ipc") == 0)
        t->kind = IPC;
    else if (strcmp(arg, "adds") == 0)
        t->kind = ADDS;
    else if (strcmp(arg, "flops") == 0)
        t->kind = FLOPS;
    else if (sscanf(arg, "c2c:%31[0-9]", size_s) == 1 && parse_size(size_s, &t->bytes) == 0)
        t->kind = C2C;
    else if (sscanf(arg, "fault:%31[0-9]", size_s) == 1 && parse_size(size_s, &t->bytes) == 0 &&
             t->bytes % 4096 == 0)
        t->kind = FAULT;
    else if (sscanf(arg, "%15[a-z]:%31[0-9]:%d", kind, size_s, &threads) == 3 &&
             parse_size(size_s, &t->bytes) == 0 && threads >= 0 &&
             (strcmp(kind, "read") == 0 || strcmp(kind, "write") == 0 ||
              (strcmp(kind, "copy") == 0 && t->bytes % 256 == 0))) {
        t->kind = strcmp(kind, "read") == 0 ? READ : strcmp(kind, "write") == 0 ? WRITE : COPY;
        t->threads = threads;
    } else
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s REPS TARGET_US TASK...\n", argv[0]);
        return 2;
    }
    reps = atoi(argv[1]);
    long target_us = atol(argv[2]);
    int ntasks = argc - 3;
    if (reps < 1 || target_us < 1 || ntasks > MAX_TASKS) {
        fprintf(stderr, "bad arguments: REPS >= 1, TARGET_US >= 1, at most %d tasks\n",
                MAX_TASKS);
        return 2;
    }
    target_s = target_us * 1e-6;
    static struct task tasks[MAX_TASKS];
    for (int i = 0; i < ntasks; i++) {
        if (parse_task(argv[i + 3], &tasks[i]) != 0) {
            fprintf(stderr, "bad task %s (read|write|copy:BYTES:THREADS, c2c:BYTES, fault:BYTES, "
                            "clock, ipc, adds, flops; BYTES a positive multiple of 128, of 256 "
                            "for copy, of 4096 for fault)\n", argv[i + 3]);
            return 2;
        }
    }
    for (int i = 0; i < 3 * IPC_N + 16; i++)
        ipc_mem[i] = 1.0;

    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        die("sched_getaffinity");
    for (int c = 0; c < CPU_SETSIZE && ncpus < MAX_CPUS; c++)
        if (CPU_ISSET(c, &allowed))
            cpus[ncpus++] = c;
    if (ncpus == 0) {
        fprintf(stderr, "no usable CPU\n");
        return 3;
    }
    printf("cpus");
    for (int i = 0; i < ncpus; i++)
        printf(" %d", cpus[i]);
    printf("\n");
    fflush(stdout);

    for (int i = 0; i < ntasks; i++)
        setup(i, &tasks[i]);
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < ntasks; i++)
            rep(i, &tasks[i]);
    for (int i = 0; i < ntasks; i++)
        if (tasks[i].team)
            team_end(tasks[i].team);
    return 0;
}
