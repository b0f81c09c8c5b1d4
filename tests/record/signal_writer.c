/* Sends SIGUSR1 to every thread of the process, the recorder's writer included, and counts
 * the handlers that ran on a thread named like the writer: the program's handlers must never
 * run there (one that allocates or forks a region would wait for a lock the writer holds). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile sig_atomic_t on_writer, handled;

static void on_usr1(int sig) {
    (void)sig;
    char name[17] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    if (strncmp(name, "cachescope", 10) == 0)
        on_writer++;
    handled++;
}

int main(void) {
    signal(SIGUSR1, on_usr1);
    int sent = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        syscall(SYS_tgkill, getpid(), atoi(e->d_name), SIGUSR1);
        sent++;
    }
    if (d)
        closedir(d);
    usleep(200000);
    printf("threads=%d handled=%d on_writer=%d\n", sent, (int)handled, (int)on_writer);
    return 0;
}
