/* Back-to-back OpenMP regions with a worksharing loop and a reduction, until a stop signal
 * ends the program:
 *   omp_regions_until_stopped PIDFILE
 * writes its pid to PIDFILE (atomically, by a rename) after the first region. A stop signal
 * mostly lands while a thread waits in one of the regions' barriers. */
#include <stdio.h>
#include <unistd.h>

static long cells[16];

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  for (long r = 0;; r++) {
    long s = 0;
#pragma omp parallel num_threads(2) reduction(+ : s)
    {
#pragma omp for
      for (int i = 0; i < 100; i++) s += i;
    }
    cells[r & 15] += s;
    if (r == 0) {
      char tmp[4096];
      snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
      FILE *f = fopen(tmp, "w");
      if (!f) return 2;
      fprintf(f, "%d\n", (int)getpid());
      fclose(f);
      if (rename(tmp, argv[1]) != 0) return 2;
    }
  }
}
