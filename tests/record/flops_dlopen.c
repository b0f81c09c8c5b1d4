/* A dot product of N doubles (2 FLOPs per element), then dlopen of libm. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  for (int i = 0; i < n; i++) {
    a[i] = i * 0.5;
    b[i] = 2.0;
  }
  double s = 0.0;
  for (int i = 0; i < n; i++)
    s += a[i] * b[i];
  void *m = dlopen("libm.so.6", RTLD_NOW);
  double (*cosine)(double) = m ? (double (*)(double))dlsym(m, "cos") : 0;
  printf("dot=%.1f cos0=%.1f\n", s, cosine ? cosine(0.0) : -1.0);
  return 0;
}
