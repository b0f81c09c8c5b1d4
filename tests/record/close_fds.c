/* Closes every inherited descriptor, as daemons and spawners do, then works: the recorder's
 * trace file must survive (before, the trace was lost and `record` exited 2). */
#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>

static volatile long a[4096];

int main(void) {
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    closefrom(3);
    close_range(3, ~0U, 0);
    for (int r = 0; r < 10; r++)
        for (int i = 0; i < 4096; i++)
            a[i] += i;
    printf("sum %ld\n", a[4095]);
    return 0;
}
