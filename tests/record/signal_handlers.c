/* The program's signal handlers under the recorder (tests/record_programs.rs):
 * - a thread interrupts `main` 20,000 times while it computes; the SA_SIGINFO handler bumps
 *   64 counters (instrumented code) and checks the siginfo it got;
 * - a handler installed with `signal` posts a semaphore another thread waits for;
 * - `sigaction` and `signal` report the program's own handlers;
 * - a SIGSEGV handler leaves by `siglongjmp` (a probe of an unreadable page), 100 times;
 * - a thread interrupts `main` 2,000 times in a loop of stores, whose handler (installed
 *   with `signal`: one-shot in the strict build) leaves by `siglongjmp`, often while the
 *   recorder hands a buffer over;
 *   `main` goes on working after all that: those accesses must be recorded;
 * - with the argument "exit", a SIGTERM handler ends the program with `exit`.
 * Built also with -std=c99 -D_XOPEN_SOURCE=700 (`signal` is then glibc's `__sysv_signal`,
 * one-shot: the handler installs itself again) and -D_FORTIFY_SOURCE=2 (`__longjmp_chk`). */
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static pthread_t victim;
static volatile int stop;
static volatile long counters[64];
static volatile long work[512];
static volatile long after[64];
static volatile int bad;
static sem_t posted;
static sigjmp_buf probe_env, loop_env;
static volatile int jumps;
static char *unreadable;

static void on_usr1(int sig, siginfo_t *info, void *context) {
    for (int j = 0; j < 64; j++)
        counters[j]++;
    if (sig != SIGUSR1 || !info || info->si_signo != SIGUSR1 || info->si_code != SI_TKILL ||
        !context)
        bad++;
}

static void on_usr2(int sig) {
    (void)sig;
    sem_post(&posted);
    signal(SIGUSR2, on_usr2); /* one-shot under System V semantics */
}

static void on_segv(int sig, siginfo_t *info, void *context) {
    (void)context;
    if (sig != SIGSEGV || (char *)info->si_addr != unreadable)
        bad++;
    siglongjmp(probe_env, 1);
}

static void on_rt(int sig) {
    signal(sig, on_rt); /* one-shot under System V semantics */
    siglongjmp(loop_env, 1);
}

static void *jumper(void *arg) {
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        int seen = jumps;
        pthread_kill(victim, SIGRTMIN);
        while (jumps == seen)
            sched_yield();
    }
    return 0;
}

static void on_term(int sig) {
    (void)sig;
    printf("left by exit in a handler\n");
    fflush(stdout);
    exit(0);
}

static void *interrupter(void *arg) {
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        pthread_kill(victim, SIGUSR1);
        if (i % 64 == 0) {
            struct timespec pause = {0, 1000};
            nanosleep(&pause, 0);
        }
    }
    stop = 1;
    return 0;
}

static void *waiter(void *arg) {
    (void)arg;
    for (int i = 0; i < 1000; i++)
        while (sem_wait(&posted) != 0)
            ;
    return 0;
}

int main(int argc, char **argv) {
    victim = pthread_self();
    sem_init(&posted, 0, 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, 0);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, 0);

    struct sigaction q;
    int query_ok = sigaction(SIGUSR1, 0, &q) == 0 && q.sa_sigaction == on_usr1 &&
                   (q.sa_flags & SA_SIGINFO) && (q.sa_flags & SA_RESTART);
    void (*first)(int) = signal(SIGUSR2, on_usr2);
    void (*again)(int) = signal(SIGUSR2, on_usr2);
    query_ok = query_ok && first == SIG_DFL && again == on_usr2 &&
               sigaction(SIGUSR2, 0, &q) == 0 && q.sa_handler == on_usr2 &&
               !(q.sa_flags & SA_SIGINFO);

    pthread_t t, w;
    pthread_create(&w, 0, waiter, 0);
    pthread_create(&t, 0, interrupter, 0);
    for (long i = 0; !stop; i++)
        work[i % 512] += i;
    pthread_join(t, 0);

    for (int i = 0; i < 1000; i++)
        raise(SIGUSR2);
    pthread_join(w, 0);

    /* /dev/zero rather than MAP_ANONYMOUS, which strict POSIX builds do not declare. */
    int zero = open("/dev/zero", O_RDONLY);
    unreadable = mmap(0, 4096, PROT_NONE, MAP_PRIVATE, zero, 0);
    if (unreadable == MAP_FAILED)
        return 2;
    int probes = 0;
    for (int i = 0; i < 100; i++) {
        if (sigsetjmp(probe_env, 1) == 0)
            *(volatile char *)unreadable = 1;
        else
            probes++;
    }
    signal(SIGRTMIN, on_rt);
    /* The jumper starts once the jump buffer is set (a signal before would jump nowhere). */
    static pthread_t j;
    if (sigsetjmp(loop_env, 1) != 0)
        jumps++;
    else
        pthread_create(&j, 0, jumper, 0);
    if (jumps < 2000)
        for (long i = 0;; i++)
            work[i % 512] += i;
    pthread_join(j, 0);

    for (long i = 0; i < 5000; i++)
        after[i % 64] = i;

    printf("bad=%d query=%s posts=1000 probes=%d jumps=%d counters=%p after=%p\n", bad,
           query_ok ? "ok" : "WRONG", probes, jumps, (void *)counters, (void *)after);
    fflush(stdout);
    if (argc > 1 && strcmp(argv[1], "exit") == 0) {
        signal(SIGTERM, on_term);
        raise(SIGTERM);
        printf("not reached\n");
    }
    return 0;
}
