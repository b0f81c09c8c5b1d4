/* Threads take a recursive mutex three levels deep: only the outermost acquisition and the
 * release that frees it are synchronization. Recording each nested one made the trace
 * impossible to replay ("waits to acquire lock ... as #1 (next is #0)"). */
#include <pthread.h>
#include <stdio.h>

static pthread_mutex_t m;
static long counter;

static void level(int depth) {
    pthread_mutex_lock(&m);
    counter++;
    if (depth > 1)
        level(depth - 1);
    pthread_mutex_unlock(&m);
}

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++)
        level(3);
    return NULL;
}

int main(void) {
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&m, &a);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("counter=%ld\n", counter);
    return 0;
}
