/* A worker calls exit() inside a parallel region while the other threads wait at the
 * region's barrier: the process ends with them waiting, and the trace must still replay (their
 * streams end with the barrier they waited at). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile long work[64];

int main(void) {
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        for (long i = 0; i < 100000; i++)
            work[t * 8] += i;
        if (t == 1) {
            usleep(50000); /* the others reach the barrier first */
            printf("thread 1 exits\n");
            fflush(stdout);
            exit(11);
        }
#pragma omp barrier
        work[t * 8] = 0;
    }
    puts("not reached");
    return 0;
}
