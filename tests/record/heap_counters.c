/* One small heap block per thread, each thread adding to its own (tests/record_programs.rs):
 * glibc puts the blocks 32 bytes apart, on one cache line, so the threads falsely share it,
 * and the recording must leave the program's heap as it is natively for the audit to see it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *work(void *arg)
{
    volatile long *counter = arg;
    for (long i = 0; i < 100000; i++)
        *counter += i; /* COUNTER_WRITE */
    return 0;
}

int main(void)
{
    long *counter[2];
    pthread_t th[2];
    void *volatile pad = malloc(8);
    (void)pad;
    for (int t = 0; t < 2; t++) {
        counter[t] = malloc(sizeof(long)); /* COUNTER_ALLOC */
        *counter[t] = 0;
    }
    for (int t = 0; t < 2; t++)
        pthread_create(&th[t], 0, work, counter[t]);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], 0);
    printf("%p %p\n", (void *)counter[0], (void *)counter[1]);
    return *counter[0] == *counter[1] ? 0 : 1;
}
