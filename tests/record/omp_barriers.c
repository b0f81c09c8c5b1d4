/* K explicit barriers in one parallel region; each thread writes its own slot in between. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
long slots[64 * 8];
int main(int argc, char **argv) {
  int k = argc > 1 ? atoi(argv[1]) : 5;
  int team = 0;
#pragma omp parallel
  {
    int t = omp_get_thread_num();
    for (int i = 0; i < k; i++) {
      slots[t * 8] += i;
#pragma omp barrier
    }
    if (t == 0)
      team = omp_get_num_threads();
  }
  printf("team=%d k=%d\n", team, k);
  return 0;
}
