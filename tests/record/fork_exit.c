/* A multithreaded program that forks children which leave with exit(): a worker keeps
 * recording (and handing full buffers to the recorder's writer) while main forks, so some
 * fork happens while the worker holds one of the recorder's locks. The children have no
 * writer thread; their exit must neither wait for one nor touch the parent's trace. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile long x;
static volatile int stop;

static void *worker(void *arg) {
    (void)arg;
    while (!stop)
        x++;
    return NULL;
}

int main(void) {
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    int ok = 0;
    for (int i = 0; i < 40; i++) {
        for (int k = 0; k < 20000; k++)
            x += k;
        pid_t p = fork();
        if (p == 0)
            exit(7);
        int st = 0;
        waitpid(p, &st, 0);
        ok += WIFEXITED(st) && WEXITSTATUS(st) == 7;
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("children exited %d\n", ok);
    return 0;
}
