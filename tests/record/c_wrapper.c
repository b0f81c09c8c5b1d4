/* Heap blocks allocated through the program's own wrapper (named by the wrapper's line and
 * its caller's) and by the C library (`strdup`: named by the line that called it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void *xmalloc(size_t n) {
    void *p = malloc(n); /* XMALLOC */
    if (!p)
        abort();
    return p;
}

/* Not `return xmalloc(...)`: a call in tail position leaves no frame of its caller on the
 * stack (the compiler jumps), so the caller could not be named. */
__attribute__((noinline)) static long *make_sums(void) {
    long *s = xmalloc(2 * sizeof(long)); /* MAKE_SUMS */
    s[0] = s[1] = 0;
    return s;
}

__attribute__((noinline)) static long *make_table(void) {
    long *t = xmalloc(64 * sizeof(long)); /* MAKE_TABLE */
    memset(t, 0, 64 * sizeof(long));
    return t;
}

int main(void) {
    long *sums = make_sums();
    long *table = make_table();
    char *name = strdup("wrapper"); /* STRDUP */
    sums[0] = 1;
    table[63] = 2;
    printf("%ld %s\n", sums[0] + table[63], name);
    free(name);
    free(table);
    free(sums);
    return 0;
}
