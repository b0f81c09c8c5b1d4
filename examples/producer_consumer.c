/*
 * producer_consumer.c -- true sharing between a producer and consumers.
 *
 * Demonstrates: true sharing (thesis §4.2 contrasts it with false sharing):
 * in every round OpenMP thread 0 fills pc_buffer, all threads meet at a
 * barrier, then the other threads read and sum disjoint parts of it, and a
 * second barrier ends the round.  The consumers genuinely need the data
 * thread 0 wrote, so every line of the buffer moves from the producer's
 * cache to a consumer's cache each round (coherence misses that padding
 * cannot remove).  With one thread, thread 0 is producer and consumer.
 *
 * Usage: producer_consumer [ROUNDS [NINTS]]   (defaults ROUNDS=100, NINTS=65536)
 * Output: the total sum (integer arithmetic), independent of thread count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>

#define MAX_INTS (1L << 22)

int pc_buffer[MAX_INTS] __attribute__((aligned(64)));

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 100;
    long nints = argc > 2 ? atol(argv[2]) : 65536;
    if (rounds < 0 || nints < 1 || nints > MAX_INTS) {
        fprintf(stderr, "usage: %s [ROUNDS [NINTS<=%ld]]\n", argv[0], MAX_INTS);
        return 2;
    }
    long total = 0;

#pragma omp parallel
    {
        int t = omp_get_thread_num(), nt = omp_get_num_threads();
        /* consumers: threads 1..nt-1, or thread 0 alone if nt == 1 */
        int ncons = nt > 1 ? nt - 1 : 1, c = nt > 1 ? t - 1 : 0;
        for (long r = 0; r < rounds; r++) {
            if (t == 0)                               /* produce */
                for (long i = 0; i < nints; i++)
                    pc_buffer[i] = (int)((i * 7 + r * 13) % 1000);
#pragma omp barrier
            if (c >= 0) {                             /* consume */
                long lo = nints * c / ncons, hi = nints * (c + 1) / ncons;
                long part = 0;
                for (long i = lo; i < hi; i++)
                    part += pc_buffer[i];
#pragma omp atomic
                total += part;
            }
#pragma omp barrier /* buffer free for the next round */
        }
    }
    printf("producer_consumer rounds=%ld nints=%ld sum=%ld\n", rounds, nints, total);
    return 0;
}
