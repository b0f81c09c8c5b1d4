/* OpenMP nest locks taken recursively, and an ordered loop. Prints the counters.
 *   argv[1]: iterations per thread of the nest-lock loop; each takes the lock DEPTH deep. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define DEPTH 3

static omp_nest_lock_t lock;
static long counter;
static long order_log[64];
static int order_len;

static void deep_increment(int depth) {
  omp_set_nest_lock(&lock);
  if (depth > 1)
    deep_increment(depth - 1);
  else
    counter++;
  omp_unset_nest_lock(&lock);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  omp_init_nest_lock(&lock);
#pragma omp parallel
  {
    for (int i = 0; i < n; i++)
      deep_increment(DEPTH);
    /* test_nest_lock: take it once more, nested inside a set. */
    omp_set_nest_lock(&lock);
    if (omp_test_nest_lock(&lock) == 2) {
      counter++;
      omp_unset_nest_lock(&lock);
    }
    omp_unset_nest_lock(&lock);
  }
#pragma omp parallel for ordered schedule(static, 1)
  for (int i = 0; i < 16; i++) {
#pragma omp ordered
    order_log[order_len++] = i;
  }
  int in_order = 1;
  for (int i = 0; i < order_len; i++)
    in_order &= order_log[i] == i;
  omp_destroy_nest_lock(&lock);
  printf("counter=%ld ordered=%d in_order=%d\n", counter, order_len, in_order);
  return 0;
}
