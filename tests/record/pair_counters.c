/* Two threads in two functions bump neighbouring members of one global, as many times as the
 * arguments say: which thread accesses the line more (the finding's writer) is the caller's
 * choice, while the finding — the pair of lines — stays the same. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct { long a, b; } st;
static long rounds[2];

static void *t_one(void *arg) {
  for (long i = 0; i < rounds[0]; i++)
    *(volatile long *)&st.a += 1; /* ONE_WRITES */
  return arg;
}

static void *t_two(void *arg) {
  for (long i = 0; i < rounds[1]; i++)
    *(volatile long *)&st.b += 1; /* TWO_WRITES */
  return arg;
}

int main(int argc, char **argv) {
  rounds[0] = argc > 2 ? atol(argv[1]) : 100000;
  rounds[1] = argc > 2 ? atol(argv[2]) : 100000;
  pthread_t t[2];
  pthread_create(&t[0], 0, t_one, 0);
  pthread_create(&t[1], 0, t_two, 0);
  pthread_join(t[0], 0);
  pthread_join(t[1], 0);
  printf("%ld\n", st.a + st.b);
  return 0;
}
