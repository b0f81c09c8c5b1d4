/* Loads the plugin named by argv[1] (a relative path in the test) and runs its plug_work on
 * two threads (tests/record_programs.rs). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static void (*work)(int);

static void *run(void *p)
{
    work((int)(long)p);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 3;
    }
    work = (void (*)(int))dlsym(h, "plug_work");
    if (!work)
        return 4;
    pthread_t th[2];
    for (long t = 0; t < 2; t++)
        pthread_create(&th[t], 0, run, (void *)t);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], 0);
    printf("loaded\n");
    return 0;
}
