/* OpenMP threads store to a global array, then the program dies the way argv[2] says:
 * "segv" (a null store in a worker thread), "abort" (a failed assert in main), "fpe" (an
 * integer division by zero), "raise" (raise(SIGSEGV), a signal the kernel did not raise) or
 * "overflow" (unbounded recursion: no stack left for a signal handler on the thread's own). */
#include <assert.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long g_array[1 << 16];
volatile int zero;

static long deep(long n) {
  volatile char pad[256];
  pad[0] = (char)n;
  return deep(n + 1) + pad[0];
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  const char *how = argc > 2 ? argv[2] : "segv";
  if (n > (1 << 16))
    n = 1 << 16;
#pragma omp parallel
  {
#pragma omp for
    for (int i = 0; i < n; i++)
      g_array[i] = i * 3;
#pragma omp single
    if (!strcmp(how, "segv")) {
      volatile long *p = NULL;
      *p = 1;
    }
  }
  printf("stored %d\n", n);
  fflush(stdout);
  if (!strcmp(how, "abort"))
    assert(n < 0);
  if (!strcmp(how, "fpe"))
    printf("%d\n", n / zero);
  if (!strcmp(how, "raise"))
    raise(SIGSEGV);
  if (!strcmp(how, "overflow"))
    return (int)deep(0);
  return 0;
}
