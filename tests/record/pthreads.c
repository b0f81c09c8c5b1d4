/* T threads (argv[1]) meet at a pthread barrier K times (argv[2]) and bump a mutex counter. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static pthread_barrier_t bar;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static int k;
static void *work(void *arg) {
  (void)arg;
  for (int i = 0; i < k; i++) {
    pthread_mutex_lock(&mu);
    counter++;
    pthread_mutex_unlock(&mu);
    pthread_barrier_wait(&bar);
  }
  return NULL;
}
int main(int argc, char **argv) {
  int t = argc > 1 ? atoi(argv[1]) : 3;
  k = argc > 2 ? atoi(argv[2]) : 4;
  pthread_t th[16];
  pthread_barrier_init(&bar, NULL, t);
  for (int i = 0; i < t; i++) pthread_create(&th[i], NULL, work, NULL);
  for (int i = 0; i < t; i++) pthread_join(th[i], NULL);
  printf("counter=%ld\n", counter);
  return 0;
}
