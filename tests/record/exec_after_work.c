/* N stores to a global array by OpenMP threads, then the program replaces itself (as a driver
 * that ends by running another tool) with the exec function argv[2] names; "child" forks a
 * child that execs and exits, and the parent goes on; "none" just returns. Prints the array's
 * address first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

long g_array[1 << 16];

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  const char *how = argc > 2 ? argv[2] : "none";
  if (n > (1 << 16))
    n = 1 << 16;
#pragma omp parallel for
  for (int i = 0; i < n; i++)
    g_array[i] = i * 3;
  printf("array=%p\n", (void *)g_array);
  fflush(stdout);
  char *args[] = {"echo", "replaced", NULL};
  char *env[] = {"CHECK=exec", NULL};
  if (!strcmp(how, "execl")) /* more arguments than registers: some on the stack */
    execl("/bin/echo", "echo", "1", "2", "3", "4", "5", "6", "7", "replaced", (char *)NULL);
  else if (!strcmp(how, "execlp"))
    execlp("echo", "echo", "replaced", (char *)NULL);
  else if (!strcmp(how, "execle"))
    execle("/usr/bin/env", "env", (char *)NULL, env);
  else if (!strcmp(how, "execv"))
    execv("/bin/echo", args);
  else if (!strcmp(how, "execvp"))
    execvp("echo", args);
  else if (!strcmp(how, "execve"))
    execve("/usr/bin/env", (char *[]){"env", NULL}, env);
  else if (!strcmp(how, "missing")) {
    execl("/nonexistent/program", "program", (char *)NULL);
    perror("exec");
    return 3;
  } else if (!strcmp(how, "child")) {
    pid_t p = fork();
    if (p == 0) {
      execl("/bin/true", "true", (char *)NULL);
      _exit(9);
    }
    int status = 0;
    waitpid(p, &status, 0);
    printf("child exited %d\n", WEXITSTATUS(status));
    return 0;
  } else if (!strcmp(how, "none"))
    return 0;
  return 1;
}
