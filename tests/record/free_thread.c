/* A thread in no barrier beside two that meet at one: after the barrier `a` writes slot[0];
 * `c`, which takes part in no barrier, waits for `a`'s flag, then writes slot[1] of the same
 * line. The audit must pair c's writes with a's after the barrier, not with the segment
 * before it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#define N 200000
long slot[2];
pthread_barrier_t bar;
atomic_int go;
static void *a_fn(void *arg) {
  (void)arg;
  pthread_barrier_wait(&bar);
  atomic_store(&go, 1);
  for (long i = 0; i < N; i++)
    *(volatile long *)&slot[0] += 1; /* A_STORE */
  return 0;
}
static void *b_fn(void *arg) {
  (void)arg;
  pthread_barrier_wait(&bar);
  return 0;
}
static void *c_fn(void *arg) {
  (void)arg;
  while (!atomic_load(&go))
    ;
  for (long i = 0; i < N; i++)
    *(volatile long *)&slot[1] += 1; /* C_STORE */
  return 0;
}
int main(void) {
  pthread_t t[3];
  pthread_barrier_init(&bar, 0, 2);
  pthread_create(&t[2], 0, c_fn, 0);
  pthread_create(&t[0], 0, a_fn, 0);
  pthread_create(&t[1], 0, b_fn, 0);
  for (int i = 0; i < 3; i++)
    pthread_join(t[i], 0);
  printf("%ld\n", slot[0] + slot[1]);
  return 0;
}
