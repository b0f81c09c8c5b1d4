/*
 * prime_sieve.c -- parallel sieve of Eratosthenes on a bit array.
 *
 * Demonstrates: false sharing on a bit array, the pattern of the thesis's
 * Listing 1.  For each prime p the loop over its multiples is shared with
 * `schedule(static,1)`, so consecutive multiples m, m+p, m+2p, ... go to
 * different threads.  For small p these bits lie in the same byte or the
 * same 64-byte line, so all threads keep writing the same lines of
 * sieve_bits.  Because neighbouring bits share a byte, each bit is set with
 * an atomic OR (`#pragma omp atomic`), which keeps the result exact; without
 * it, updates would be lost (a true race, not just false sharing).
 * sieve_bits is a named global so a symbolizer can name it.
 *
 * Usage: prime_sieve [N]   (default N=2000000; counts primes below N)
 * Output: the number of primes below N, independent of the thread count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define MAX_N 100000000L

/* bit m set <=> m is composite */
unsigned char sieve_bits[MAX_N / 8 + 1] __attribute__((aligned(64)));

static inline int is_marked(long m)
{
    return (sieve_bits[m >> 3] >> (m & 7)) & 1;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    if (n < 2 || n > MAX_N) {
        fprintf(stderr, "usage: %s [N in 2..%ld]\n", argv[0], MAX_N);
        return 2;
    }

#pragma omp parallel
    for (long p = 2; p * p < n; p++) {
        /* every thread sees the same bit here: bits below p*p are final
           once the previous omp for (which ends with a barrier) is done;
           the read is atomic because other bits of the byte may be being
           set by a thread already in the next omp for */
        unsigned char byte;
#pragma omp atomic read
        byte = sieve_bits[p >> 3];
        if ((byte >> (p & 7)) & 1)
            continue;
        long first = p * p, count = (n - 1 - first) / p + 1;
#pragma omp for schedule(static, 1)
        for (long k = 0; k < count; k++) {
            long m = first + k * p;
#pragma omp atomic update
            sieve_bits[m >> 3] |= (unsigned char)(1u << (m & 7));
        }
    }

    long primes = 0;
    for (long m = 2; m < n; m++)
        primes += !is_marked(m);
    printf("prime_sieve N=%ld primes_below_N=%ld\n", n, primes);
    return 0;
}
