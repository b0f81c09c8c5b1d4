/* Signal dispositions the recorder keeps as the program sees them (tests/record_programs.rs).
 * The recorder handles SIGINT, SIGTERM and the crash signals itself where the program left
 * the default; to the program they must still look and act like the default.
 *   query     : sigaction and signal report SIG_DFL for them; siginterrupt then signal
 *               interrupts a read (EINTR, as glibc's signal does after siginterrupt);
 *   restore   : saves SIGINT's disposition, installs a handler, restores it, raises SIGINT:
 *               the program dies of it at once ("not reached" is never printed);
 *   fork      : a forked child killed by SIGTERM dies of it;
 *   rechain   : a SIGSEGV handler that restores the default and raises it again;
 *   altstack  : a thread has no alternate signal stack until the program installs one (in
 *               the main thread and another); an SA_ONSTACK handler with 128 KiB of locals
 *               runs on the program's; disabled, there is none again. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* siginterrupt */

static volatile long work[64];
static volatile int alarms;

static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

static void on_int(int sig) { (void)sig; }

static void on_segv(int sig) {
    signal(sig, SIG_DFL);
    raise(sig);
}

static char alt[256 * 1024];
static volatile int on_alt;

static void on_usr1(int sig) {
    volatile char big[128 * 1024];
    for (unsigned i = 0; i < sizeof big; i += 64)
        big[i] = (char)sig;
    stack_t cur;
    on_alt = sigaltstack(0, &cur) == 0 && (cur.ss_flags & SS_ONSTACK) && cur.ss_sp == alt &&
             (char *)&big[0] >= alt && (char *)&big[0] < alt + sizeof alt;
}

/* Whether the calling thread has no alternate stack (as sigaltstack reports it). */
static int none(void) {
    stack_t q;
    return sigaltstack(0, &q) == 0 && (q.ss_flags & SS_DISABLE) && q.ss_sp == 0;
}

static void *thread_none(void *arg) {
    (void)arg;
    return none() ? (void *)1 : 0;
}

static int altstack(void) {
    pthread_t t;
    void *other = 0;
    int before = none();
    if (pthread_create(&t, 0, thread_none, 0) != 0 || pthread_join(t, &other) != 0)
        return 2;
    stack_t mine = {.ss_sp = alt, .ss_flags = 0, .ss_size = sizeof alt}, old, q;
    int own = sigaltstack(&mine, &old) == 0 && (old.ss_flags & SS_DISABLE) &&
              sigaltstack(0, &q) == 0 && q.ss_sp == alt && q.ss_size == sizeof alt;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, 0);
    raise(SIGUSR1);
    mine.ss_flags = SS_DISABLE;
    int after = sigaltstack(&mine, 0) == 0 && none();
    printf("altstack %s, thread %s, own %s, handler %s, disabled %s\n",
           before ? "none" : "WRONG", other ? "none" : "WRONG", own ? "ok" : "WRONG",
           on_alt ? "on it" : "WRONG", after ? "none" : "WRONG");
    return 0;
}

static int query(void) {
    int ok = 1;
    int sigs[] = {SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction q;
        if (sigaction(sigs[i], 0, &q) != 0 || q.sa_handler != SIG_DFL || q.sa_flags != 0)
            ok = 0;
    }
    /* SIG_IGN and back: the default again. */
    if (signal(SIGTERM, SIG_IGN) != SIG_DFL || signal(SIGTERM, SIG_DFL) != SIG_IGN ||
        signal(SIGTERM, SIG_DFL) != SIG_DFL)
        ok = 0;
    int fds[2];
    if (pipe(fds) != 0)
        return 2;
    siginterrupt(SIGALRM, 1);
    signal(SIGALRM, on_alarm);
    alarm(1);
    char c;
    ssize_t n = read(fds[0], &c, 1);
    int interrupted = n < 0 && errno == EINTR && alarms == 1;
    printf("defaults %s interrupted %s\n", ok ? "ok" : "WRONG", interrupted ? "ok" : "WRONG");
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "query";
    for (long i = 0; i < 100000; i++)
        work[i % 64] += i;
    if (strcmp(mode, "query") == 0)
        return query();
    if (strcmp(mode, "altstack") == 0)
        return altstack();
    if (strcmp(mode, "restore") == 0) {
        struct sigaction mine, saved;
        memset(&mine, 0, sizeof mine);
        mine.sa_handler = on_int;
        sigaction(SIGINT, &mine, &saved);
        sigaction(SIGINT, &saved, 0);
        printf("restored %s\n", saved.sa_handler == SIG_DFL ? "default" : "WRONG");
        fflush(stdout);
        raise(SIGINT);
        printf("not reached\n");
        return 0;
    }
    if (strcmp(mode, "fork") == 0) {
        pid_t child = fork();
        if (child == 0) {
            for (int i = 0; i < 50; i++)
                sleep(1);
            _exit(0);
        }
        usleep(200000);
        kill(child, SIGTERM);
        int status;
        waitpid(child, &status, 0);
        printf("child %s\n",
               WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM ? "died of SIGTERM" : "WRONG");
        return 0;
    }
    if (strcmp(mode, "rechain") == 0) {
        signal(SIGSEGV, on_segv);
        printf("faulting\n");
        fflush(stdout);
        *(volatile int *)0 = 1;
        printf("not reached\n");
        return 0;
    }
    return 2;
}
