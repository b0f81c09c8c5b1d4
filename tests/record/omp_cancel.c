/* `cancel parallel` while another member waits at a barrier, in a loop of regions, with
   OMP_CANCELLATION=true (tests/record_programs.rs). */
#include <omp.h>
#include <stdio.h>
#include <unistd.h>

long cnt[2];

int main(void) {
    for (int r = 0; r < 4; r++) {
#pragma omp parallel num_threads(2)
        {
            int t = omp_get_thread_num();
            cnt[t]++;
            if (t == 1 && (r & 1)) {
                usleep(20000);
#pragma omp cancel parallel
            }
#pragma omp barrier
            cnt[t]++;
        }
    }
    printf("done\n");
    return 0;
}
