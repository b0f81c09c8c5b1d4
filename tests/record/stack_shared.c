/* Threads writing neighbouring elements of a local array of the function that starts them:
 * the false-sharing audit must name the array (a local of that function, from DWARF), not an
 * address. `omp`: a parallel region writes partial[t]; `padded`: the same with each element
 * on its own 64-byte line (no finding); `pthreads`: two threads created with pointers to
 * neighbouring elements; `waves`: that twice, from two functions one after the other;
 * `deep`: a region forked twelve calls below the function that declares the array;
 * `captures`: a region that captures so many locals that clang passes some of them to the
 * runtime on the stack (pushed right before the fork call, below the body's stack pointer);
 * `merged`: each thread updates its element of one of two local arrays, chosen at run time;
 * clang -O2 merges the two branches' updates into one load and store at line 0. */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define ROUNDS 100000

static long sum_omp(void) {
    volatile long partial[8] = {0}; /* OMP_LOCAL */
#pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num();
        for (long i = 0; i < ROUNDS; i++)
            partial[t] += i & 3;
    }
    long s = 0;
    for (int i = 0; i < 8; i++)
        s += partial[i];
    return s;
}

struct padded {
    _Alignas(64) volatile long value;
};

static long sum_padded(void) {
    struct padded partial[2]; /* PADDED_LOCAL */
    memset(partial, 0, sizeof partial);
#pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num();
        for (long i = 0; i < ROUNDS; i++)
            partial[t].value += i & 3;
    }
    return partial[0].value + partial[1].value;
}

static void *count(void *arg) {
    volatile long *c = arg;
    for (long i = 0; i < ROUNDS; i++)
        *c += i & 1;
    return NULL;
}

static long sum_pthreads(void) {
    volatile long counts[2] = {0, 0}; /* PTHREAD_LOCAL */
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, count, (void *)&counts[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    return counts[0] + counts[1];
}

/* Two waves: each function starts two threads on its own local array and joins them; the
 * second function's array takes the first one's stack bytes, but not at the same time. */
static __attribute__((noinline)) long wave_alpha(void) {
    volatile long alpha[2] = {0, 0}; /* ALPHA_LOCAL */
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, count, (void *)&alpha[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    return alpha[0] + alpha[1];
}

static __attribute__((noinline)) long wave_beta(void) {
    volatile long beta[2] = {0, 0}; /* BETA_LOCAL */
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, count, (void *)&beta[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    return beta[0] + beta[1] + 1; /* not wave_alpha's code: gcc -O2 would fold the two */
}

/* A region forked a few calls below the function whose local array it writes. */
static __attribute__((noinline)) long deep(int d, volatile long *arr) {
    if (d > 0)
        return deep(d - 1, arr) + 1;
#pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num();
        for (long i = 0; i < ROUNDS; i++)
            arr[t] += i & 3;
    }
    return arr[0] + arr[1];
}

static __attribute__((noinline)) long sum_deep(void) {
    volatile long deep_arr[4] = {0, 0, 0, 0}; /* DEEP_LOCAL */
    return deep(11, deep_arr);
}

static __attribute__((noinline)) long sum_captures(long n) {
    long hits[2] = {0, 0};   /* CAPTURES_LOCAL */
    long limits[2] = {n, n}; /* read-only from here on */
    long scale[2] = {3, 1};
    long lo[2] = {0, 0};
    long hi[2] = {1, 1};
#pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num();
        for (long i = 0; i < limits[t]; i++) {
            hits[t] += (i * scale[0] + scale[1]) & (hi[t] - lo[t]);
            __asm__ volatile("" ::: "memory");
        }
    }
    return hits[0] + hits[1];
}

static __attribute__((noinline)) long sum_merged(int second) {
    _Alignas(64) long first_bins[2][4] = {{0}}; /* MERGED_LOCAL */
    _Alignas(64) long second_bins[2][4] = {{0}};
#pragma omp parallel num_threads(2)
    {
        int t = omp_get_thread_num();
        for (long i = 0; i < ROUNDS; i++) {
            if (second)
                second_bins[t][i & 3]++;
            else
                first_bins[t][i & 3]++;
        }
    }
    return first_bins[0][0] + first_bins[1][1] + second_bins[0][2] + second_bins[1][3];
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "omp";
    long s = strcmp(mode, "padded") == 0     ? sum_padded()
             : strcmp(mode, "pthreads") == 0 ? sum_pthreads()
             : strcmp(mode, "waves") == 0    ? wave_alpha() + wave_beta()
             : strcmp(mode, "deep") == 0     ? sum_deep()
             : strcmp(mode, "captures") == 0 ? sum_captures(ROUNDS)
             : strcmp(mode, "merged") == 0   ? sum_merged(argc > 2)
                                             : sum_omp();
    printf("%s %ld\n", mode, s);
    return 0;
}
