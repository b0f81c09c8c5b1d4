// An OpenMP program that calls no omp_* function: the only runtime entry point it references
// (GOMP_parallel, with gcc) is one the recorder interposes, so a linker in --as-needed mode
// would drop the runtime unless `cachescope cc` keeps it.
#include <stdio.h>

int arrived;

int main(void) {
#pragma omp parallel
    __atomic_fetch_add(&arrived, 1, __ATOMIC_RELAXED);
    printf("threads=%d\n", arrived);
    return 0;
}
