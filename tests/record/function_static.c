/* Two threads write two members of a function's static struct: gcc names its symbol `g.0`,
 * clang `work.g`; the audit names it `static g of work`, declared in `work`. */
#include <pthread.h>
#include <stdio.h>

struct big {
  char pad[100];
  long a;
  long b;
};

static void *work(void *arg) {
  static struct big g; /* DECLARED */
  long id = (long)arg;
  long *p = id ? &g.b : &g.a;
  for (long i = 0; i < 100000; i++)
    *(volatile long *)p += 1;
  return (void *)g.a;
}

int main(void) {
  pthread_t t[2];
  for (long i = 0; i < 2; i++)
    pthread_create(&t[i], 0, work, (void *)i);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], 0);
  puts("ok");
  return 0;
}
