/* memset/memcpy of 200-byte objects: compilers call the library (or __tsan_mem*) for these. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct big { char b[200]; };
struct big A;
/* Opaque to the optimizer: afterwards A's contents are unknown, so the copy stays a copy. */
__attribute__((noinline)) void touch(struct big *x, int v) { x->b[v] = (char)v; }
int main(int argc, char **argv) {
  memset(&A, argc, sizeof A);
  touch(&A, argc);
  char *p = malloc(1000);
  memcpy(p + argc, &A, sizeof A); /* argc: not a constant offset, so not folded */
  printf("A=%p p=%p sum=%d\n", (void *)&A, (void *)p, p[17] + p[argc + 100]);
  free(p);
  return 0;
}
