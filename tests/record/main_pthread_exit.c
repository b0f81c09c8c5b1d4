/* `main` ends with pthread_exit while its workers still run: the process ends when the last
 * worker does, with status 0. The recorder's writer thread must not keep it alive. */
#include <pthread.h>
#include <stdio.h>

static volatile long a[1000];

static void *worker(void *arg) {
    (void)arg;
    for (int r = 0; r < 100; r++)
        for (int i = 0; i < 1000; i++)
            a[i] += i;
    puts("worker done");
    return NULL;
}

int main(void) {
    pthread_t t;
    for (int i = 0; i < 3; i++)
        pthread_create(&t, NULL, worker, NULL);
    pthread_exit(NULL);
}
