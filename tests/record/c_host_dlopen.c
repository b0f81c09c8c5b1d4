/* A C program that loads a C++ plugin with dlopen (tests/record_programs.rs). */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    long (*sum)(long) = (long (*)(long))dlsym(h, "plugin_sum");
    if (!sum)
        return 2;
    printf("plugin_sum=%ld\n", sum(100));
    return 0;
}
