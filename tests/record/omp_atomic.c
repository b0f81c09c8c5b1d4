/* An OpenMP atomic counter: the total must not depend on the shim. */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  long counter = 0;
  double fsum = 0.0;
#pragma omp parallel for
  for (long i = 0; i < n; i++) {
#pragma omp atomic
    counter += i % 7;
#pragma omp critical
    fsum += 0.5;
  }
  printf("counter=%ld fsum=%.1f\n", counter, fsum);
  return 0;
}
