/* A local array the threads of a team write element by element (false sharing), in a frame
   the compiler realigns for another local declared alignas(64) (tests/record_programs.rs).
   gcc realigns main's frame before it saves %rbp (`lea 8(%rsp),%r10; and $-64,%rsp;
   push -8(%r10); push %rbp; mov %rsp,%rbp`) and addresses the locals from that %rbp,
   which is then not the canonical frame address minus 16. */
#include <omp.h>
#include <stdio.h>

double a[1 << 18];

int main(void) {
    for (int i = 0; i < (1 << 18); i++)
        a[i] = i * 0.5;
    _Alignas(64) double scratch[8] = {0};
    double partial[2] = {0, 0}; /* PARTIAL_DECL */
    for (int r = 0; r < 2; r++) {
#pragma omp parallel num_threads(2)
        {
            int t = omp_get_thread_num();
#pragma omp for schedule(static)
            for (int i = 0; i < (1 << 18); i++)
                partial[t] += a[i]; /* PARTIAL_WRITE */
        }
    }
    scratch[0] = partial[0] + partial[1];
    printf("%.1f\n", scratch[0]);
    return 0;
}
