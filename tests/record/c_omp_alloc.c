/* Each thread of an OpenMP region allocates its own block: the master thread enters the
 * region from main (through the OpenMP runtime and the recorder's wrapper), the others from
 * their thread start, yet all blocks come from the same line and must have the same name. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

static long *slots[64];

int main(void) {
    int threads = 0;
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        long *p = malloc(sizeof(long) * (1000 + t)); /* REGION_ALLOC */
        *p = 0;
        for (int i = 0; i < 1000; i++)
            *p += i;
        slots[t] = p;
#pragma omp single
        threads = omp_get_num_threads();
    }
    long sum = 0;
    for (int t = 0; t < threads; t++) {
        sum += *slots[t];
        free(slots[t]);
    }
    printf("threads=%d sum=%ld\n", threads, sum);
    return 0;
}
