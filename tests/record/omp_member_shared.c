// A heap block assigned inside an OpenMP region to a member of a variable the enclosing
// function declares (`s->data`, `s` shared), while a global `s` of another type exists
// (tests/record_programs.rs). clang -O2 gives the region's code no entry for the shared
// `s`: the block must not be named after the global (`s->data[8..15]`, chars); the local's
// name (`s->data[1]`) or byte offsets are right.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

struct chars {
    char *data;
};
struct longs {
    long *data;
};
struct chars *s;
struct longs shared_longs;

int main(void)
{
    struct longs *s = &shared_longs;
#pragma omp parallel num_threads(3)
    {
        int id = omp_get_thread_num();
        if (id == 0)
            s->data = calloc(8, sizeof(long)); /* SHARED */
#pragma omp barrier
        if (id > 0)
            for (int i = 0; i < 100000; ++i) {
                s->data[id] += 1;
                __asm__ volatile("" ::: "memory");
            }
    }
    printf("%ld %d\n", s->data[1] + s->data[2], (void *)s == (void *)&s);
    return 0;
}
