/* Phases 1 and 3 write padded[id][0] (64 bytes apart: a 128-byte line, or the data shifted by
 * 64, puts both on one line: latent false sharing); phase 2 writes data[id], falsely shared
 * as recorded. Compilers place data on padded's first line or next to it: either way padded
 * is idle on that line while data is shared, and its latent finding must stay. */
#include <pthread.h>
#include <stdio.h>

long data[2];
long padded[2][8];
pthread_barrier_t bar;

static void *work(void *arg) {
  long id = (long)arg;
  for (long i = 0; i < 100000; i++)
    *(volatile long *)&padded[id][0] += 1; /* PADDED_WRITES */
  pthread_barrier_wait(&bar);
  for (long i = 0; i < 100000; i++)
    *(volatile long *)&data[id] += 1; /* DATA_WRITES */
  pthread_barrier_wait(&bar);
  for (long i = 0; i < 100000; i++)
    *(volatile long *)&padded[id][0] += 1;
  return 0;
}

int main(void) {
  pthread_t t[2];
  pthread_barrier_init(&bar, 0, 2);
  for (long i = 0; i < 2; i++)
    pthread_create(&t[i], 0, work, (void *)i);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], 0);
  printf("%ld\n", data[0] + data[1] + padded[0][0] + padded[1][0]);
  return 0;
}
