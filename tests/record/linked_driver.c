/* A driver built without `cachescope cc` (a test harness, say) that links the instrumented
 * library of tests/record/dl_counters_plugin.c at start and runs its plug_work on two
 * threads (tests/record_lifecycle.rs). */
#include <pthread.h>
#include <stdio.h>

void plug_work(int t);

static void *run(void *p)
{
    plug_work((int)(long)p);
    return 0;
}

int main(void)
{
    pthread_t th[2];
    for (long t = 0; t < 2; t++)
        pthread_create(&th[t], 0, run, (void *)t);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], 0);
    printf("linked\n");
    return 0;
}
