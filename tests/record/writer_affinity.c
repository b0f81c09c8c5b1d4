// Prints the CPU affinity of the shim's writer thread ("cachescope-writ..." in
// /proc/self/task/*/comm) after an OpenMP region, run with OMP_PROC_BIND=true, which binds
// the main thread to one CPU: the writer must keep the CPUs `cachescope record` had.
#include <dirent.h>
#include <stdio.h>
#include <string.h>

static double sum[64];

static void print_allowed(const char *who, const char *task) {
  char path[256], line[512];
  snprintf(path, sizeof path, "/proc/self/task/%s/status", task);
  FILE *f = fopen(path, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "Cpus_allowed_list:", 18) == 0) printf("%s=%s", who, line + 19);
  fclose(f);
}

int main(void) {
#pragma omp parallel for
  for (int i = 0; i < 1 << 16; i++) sum[i & 63] += i;
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  while (d && (e = readdir(d))) {
    char path[256], comm[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f) && strncmp(comm, "cachescope-writ", 15) == 0)
      print_allowed("writer", e->d_name);
    fclose(f);
  }
  if (d) closedir(d);
  return sum[1] > 0 ? 0 : 1;
}
