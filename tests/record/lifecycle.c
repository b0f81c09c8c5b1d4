/* Process life-cycle cases for the recorder.
 *   lifecycle fork PIDFILE   : forks a child that writes memory and exits; the parent waits.
 *   lifecycle quit PIDFILE   : writes memory, then ends with _exit(0) (no recorder's end).
 *   lifecycle spin PIDFILE   : writes its pid to PIDFILE, then writes memory until killed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
volatile long sink[1024];
static void work(long n) {
  for (long i = 0; i < n; i++) sink[i & 1023] += i;
}
int main(int argc, char **argv) {
  if (argc < 3) return 2;
  FILE *f = fopen(argv[2], "w");
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  if (strcmp(argv[1], "fork") == 0) {
    work(1000);
    pid_t c = fork();
    if (c == 0) {
      work(100000);
      _exit(0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    work(1000);
    printf("child=%d\n", WEXITSTATUS(st));
    return 0;
  }
  if (strcmp(argv[1], "quit") == 0) {
    work(3000000);
    _exit(0);
  }
  for (;;) work(1000000);
}
