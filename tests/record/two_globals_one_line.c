/* Two globals in one cache line, each falsely shared by its own pair of threads in a wave of
 * its own (tests/record_programs.rs): the audit must report both, each with its own threads,
 * code and simulated misses, and count the unrolled loop's stores as one line's. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

struct pair {
    volatile long v[4];
};
/* One section, 64-byte aligned, 32 bytes each: `second` then `first` in one line. */
__attribute__((section(".data.two_globals"), aligned(64))) struct pair second = {{1}};
__attribute__((section(".data.two_globals"), aligned(32))) struct pair first = {{1}};

static void *wa(void *p)
{
    long t = (long)p;
    /* Four copies of the update: still one source line for the audit's counts. */
#pragma GCC unroll 4
    for (long i = 0; i < 100000; i++)
        first.v[t] += i; /* FIRST_WRITE */
    return 0;
}

static void *wb(void *p)
{
    long t = (long)p;
    for (long i = 0; i < 100000; i++)
        second.v[t] += i; /* SECOND_WRITE */
    return 0;
}

static void wave(void *(*f)(void *))
{
    pthread_t th[2];
    for (long t = 0; t < 2; t++)
        pthread_create(&th[t], 0, f, (void *)t);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], 0);
}

int main(void)
{
    wave(wa);
    wave(wb);
    printf("%s\n", (uintptr_t)&first / 64 == (uintptr_t)&second / 64 ? "one line" : "two lines");
    return 0;
}
