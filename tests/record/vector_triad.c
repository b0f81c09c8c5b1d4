/* STREAM triad as performance engineers build it (tests/record_programs.rs: -O3
 * -march=native, -flto): every byte of b and c must be recorded as loaded and every byte of a
 * as stored, whatever the vector width; then a read-modify-write loop on a volatile counter,
 * whose loads clang's ThreadSanitizer leaves out by default; then a small memset and memcpy,
 * which gcc expands into plain vector moves that its ThreadSanitizer does not see. */
#include <stdio.h>
#include <string.h>

#define N 4096
double a[N], b[N], c[N];
volatile long counter;
char small_buf[40], small_copy[24];

__attribute__((noinline)) void init(void)
{
    for (int i = 0; i < N; i++) {
        b[i] = i;
        c[i] = 2.0 * i;
    }
}

__attribute__((noinline)) void triad(double s)
{
    for (int i = 0; i < N; i++)
        a[i] = b[i] + s * c[i];
}

/* Apart, so that the copy must load what the memset stored. */
__attribute__((noinline)) void clear(int v)
{
    memset(small_buf, v, sizeof small_buf);
}

__attribute__((noinline)) void copy(void)
{
    memcpy(small_copy, small_buf, sizeof small_copy);
}

int main(int argc, char **argv)
{
    (void)argv;
    init();
    triad((double)argc);
    for (long i = 0; i < 1000; i++)
        counter += i;
    clear(argc);
    copy();
    printf("a=%p b=%p c=%p counter=%p buf=%p copy=%p sum=%.1f\n", (void *)a, (void *)b,
           (void *)c, (void *)&counter, (void *)small_buf, (void *)small_copy,
           a[N - 1] + (double)counter);
    return 0;
}
