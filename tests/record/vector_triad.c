/* STREAM triad as performance engineers build it (tests/record_programs.rs: -O3
 * -march=native, -flto): every byte of b and c must be recorded as loaded and every byte of a
 * as stored, whatever the vector width; then a read-modify-write loop on a volatile counter,
 * whose loads clang's ThreadSanitizer leaves out by default. */
#include <stdio.h>

#define N 4096
double a[N], b[N], c[N];
volatile long counter;

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

int main(int argc, char **argv)
{
    (void)argv;
    init();
    triad((double)argc);
    for (long i = 0; i < 1000; i++)
        counter += i;
    printf("a=%p b=%p c=%p counter=%p sum=%.1f\n", (void *)a, (void *)b, (void *)c,
           (void *)&counter, a[N - 1] + (double)counter);
    return 0;
}
