/* N 8-byte stores to a global array, then prints the array's address;
   exits with argv[2]. */
#include <stdio.h>
#include <stdlib.h>
long g_array[4096];
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  for (int i = 0; i < n; i++)
    g_array[i] = i * 3; /* STORE-LINE */
  printf("array=%p\n", (void *)g_array);
  return argc > 2 ? atoi(argv[2]) : 0;
}
