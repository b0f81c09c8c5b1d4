/* Row- vs column-wise sum of a matrix (thesis Fig. 3.3): same work, very different misses. */
#include <stdio.h>
#define N 160
static int a[N][N];

int main(void) {
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            a[i][j] = i ^ j;
    long rows = 0, cols = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            rows += a[i][j];
    for (int j = 0; j < N; j++)
        for (int i = 0; i < N; i++)
            cols += a[i][j];
    printf("%ld %ld\n", rows, cols);
    return rows != cols;
}
