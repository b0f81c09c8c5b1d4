// A taskloop of many tasks with a C++ firstprivate: more tasks than libgomp queues (64 per
// thread), so it runs them at once on the calling thread, after copying every task's
// argument block onto the stack (num_tasks * block size):
//   omp_taskloop_stack N
// N = 25,000 fits in an 8 MiB stack natively; with 88 bytes more per block (the recorder's
// header, before 2026-11-29) it did not.
#include <omp.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>

struct Obj {
  long v[6];
  Obj(long x) {
    for (int i = 0; i < 6; i++) v[i] = x + i;
  }
  Obj(const Obj &o) { memcpy(v, o.v, sizeof v); }
  ~Obj() {}
};

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 25000;
  long *a = (long *)calloc(n, sizeof(long));
  if (!a) return 2;
  long out = 0;
#pragma omp parallel num_threads(2)
#pragma omp single
  {
    Obj o(3);
#pragma omp taskloop firstprivate(o) grainsize(1)
    for (long i = 0; i < n; i++) a[i] = o.v[i % 6] + i;
    for (long i = 0; i < n; i++) out += a[i];
  }
  printf("n=%ld sum=%ld\n", n, out);
  free(a);
  return 0;
}
