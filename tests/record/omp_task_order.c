/* Tasks that OpenMP orders, writing neighbouring counters: never concurrent, so no false
   sharing, whichever threads run them. argv[1] picks how they are ordered:
     taskwait   single: task A bumps cnt[0]; taskwait; task B bumps cnt[1]
     depend     single: A depend(out: cnt[0]), B depend(in: cnt[0]) depend(out: cnt[1])
     taskgroup  single: taskgroup { A }; B
     grandchild single: taskgroup { task { A } }; B (A is a task of the group's task)
     taskloop   single: A bumps cnt[0] half-way; a taskloop of two tasks, B and a spinning
                one; A bumps cnt[0] the rest of the way (gcc: libgomp's GOMP_taskloop)
   The creator spins a little after creating one of them, so that the other thread (waiting
   at the single's end, where it runs queued tasks) usually takes that one, and runs the
   other itself: the tasks then run on different threads. Prints the thread that ran A and
   B, and the counters. */
#include <omp.h>
#include <stdio.h>
#include <string.h>

#define N 2000000

static long cnt[2];
static int ran[2];

static void bump(int k, long n) {
  volatile long *c = &cnt[k];
  ran[k] = omp_get_thread_num();
  for (long i = 0; i < n; i++)
    (*c)++;
}

static void work(int k) { bump(k, N); }

static void spin(void) {
  volatile long s = 0;
  for (long i = 0; i < 20000000; i++)
    s += i;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "taskwait";
#pragma omp parallel num_threads(2)
#pragma omp single
  {
    if (!strcmp(mode, "depend")) {
      /* A runs at once on the creator (undeferred); B, ready when created, goes to the
         other thread while the creator spins. */
#pragma omp task depend(out : cnt[0]) if (0)
      work(0);
#pragma omp task depend(in : cnt[0]) depend(out : cnt[1])
      work(1);
      spin();
    } else if (!strcmp(mode, "grandchild")) {
      /* The group's task, which the other thread takes while the creator spins, creates A
         and ends without waiting for it; the taskgroup waits for A too. */
#pragma omp taskgroup
      {
#pragma omp task
        {
#pragma omp task
          work(0);
        }
        spin();
      }
#pragma omp task if (0)
      work(1);
    } else if (!strcmp(mode, "taskloop")) {
      /* B follows the code before the taskloop, and the code after it follows B (the
         taskloop's implicit taskgroup); whichever thread takes the spinning task, the other
         one runs B or the creator runs both. */
      bump(0, N / 2);
#pragma omp taskloop num_tasks(2)
      for (int t = 0; t < 2; t++) {
        if (t == 0)
          work(1);
        else
          spin();
      }
      bump(0, N / 2);
    } else if (!strcmp(mode, "taskgroup")) {
      /* A goes to the other thread while the creator spins; B runs at once on the creator
         (undeferred). */
#pragma omp taskgroup
      {
#pragma omp task
        work(0);
        spin();
      }
#pragma omp task if (0)
      work(1);
    } else {
      /* Likewise, with a taskwait after A. */
#pragma omp task
      work(0);
      spin();
#pragma omp taskwait
#pragma omp task if (0)
      work(1);
    }
  }
  printf("ran %d %d\n%ld %ld\n", ran[0], ran[1], cnt[0], cnt[1]);
  return 0;
}
