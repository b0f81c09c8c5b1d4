// C objects whose members a false-sharing finding names (tests/record_programs.rs): a struct
// whose flexible array member is initialised statically (the symbol is larger than the type
// DWARF gives), a flag one thread polls all the time and resets now and then (it reads the
// flag, however rarely it also writes it), a message in the "struct hack" form (`char
// data[1]` last, the block larger), heap blocks no variable names correctly, which must
// stay byte offsets: from allocating wrappers whose own variables are raw bytes (`void *`,
// `char *`) or a header they hand out the block past, or one clang -O2 allocates by a call
// merged from two branches (DWARF line 0: the line before it declares another pointer); and
// blocks named after what a statement assigns them to: a global declared elsewhere, and a
// member (`v->data`) on a line that declares another variable (`v`); or whose address it
// hands `posix_memalign` (`&apairs`, `&spare.data`); and a declaration continued on the
// next line (`long *split =`, then the call).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hist {
    long n;
    long bins[];
};
__attribute__((aligned(64))) struct hist hist = { 0, { 0, 0, 0, 0, 0, 0, 0 } };

struct queue {
    long head;
    long flag;
    long count;
} __attribute__((aligned(64)));
struct queue queue;

struct pair {
    long a, b;
};
struct pair *pairs;
long *counts;

struct hdr {
    long refcnt;
    long size;
};
struct pair *payload;

struct msg {
    int tag;
    int len;
    char data[1];
};
struct msg *message;

struct vec {
    long n;
    long *data;
};
struct vec *vector;
long *sums;
long *merged;
void *kept;
struct pair *apairs;
struct vec spare;
long *halves;

__attribute__((noinline)) static void *xmalloc(size_t n)
{
    void *p = aligned_alloc(64, n); /* XMALLOC */
    if (!p)
        abort();
    return p;
}

__attribute__((noinline)) static char *arena_get(size_t n)
{
    char *raw = aligned_alloc(64, n); /* ARENA */
    memset(raw, 0, n);
    return raw;
}

__attribute__((noinline)) static void *header_alloc(size_t n)
{
    struct hdr *h = aligned_alloc(64, sizeof *h + n); /* HEADER */
    h->refcnt = 1;
    h->size = n;
    return h + 1;
}

static void *work(void *arg)
{
    long k = (long)arg, seen = 0;
    for (int i = 0; i < 100000; ++i) {
        if (k == 0) {
            hist.n++;
            queue.head++;
            pairs[0].b++;
            counts[1]++;
            payload[0].b++;
            message->data[20]++;
            vector->data[1]++;
            sums[3]++;
            merged[1]++;
            apairs[0].b++;
            spare.data[1]++;
            halves[1]++;
        } else {
            hist.bins[3]++;
            seen += *(volatile long *)&queue.flag;
            queue.count++;
            pairs[1].a++;
            counts[2]++;
            payload[1].a++;
            message->data[28]++;
            vector->data[2]++;
            sums[4]++;
            merged[2]++;
            apairs[1].a++;
            spare.data[2]++;
            halves[2]++;
            if (i % 1000 == 0)
                queue.flag = 0;
        }
        __asm__ volatile("" ::: "memory");
    }
    return (void *)seen;
}

int main(int argc, char **argv)
{
    (void)argv;
    struct pair *p = xmalloc(4 * sizeof *p); /* PAIRS */
    memset(p, 0, 4 * sizeof *p);
    long *c = (long *)arena_get(8 * sizeof *c); /* COUNTS */
    pairs = p;
    counts = c;
    struct pair *pl = header_alloc(4 * sizeof *pl); /* PAYLOAD */
    memset(pl, 0, 4 * sizeof *pl);
    payload = pl;
    struct msg *m = aligned_alloc(64, 64); /* MESSAGE */
    memset(m, 0, 64);
    message = m;
    struct vec *v = malloc(sizeof *v); v->data = aligned_alloc(64, 64); /* VECTOR */
    memset(v->data, 0, 64);
    vector = v;
    sums = aligned_alloc(64, 64); /* SUMS */
    memset(sums, 0, 64);
    struct pair *before = calloc(1, sizeof *before); kept = before; /* BEFORE */
    if (argc > 5) {
        long *l = aligned_alloc(64, 64); /* LONG_BRANCH */
        l[7] = argc;
        merged = l;
    } else {
        struct pair *q = aligned_alloc(64, 64); /* PAIR_BRANCH */
        q[3].b = argc;
        merged = (long *)q;
    }
    if (posix_memalign((void **)&apairs, 64, 4 * sizeof *apairs) != 0) /* APAIRS */
        return 1;
    memset(apairs, 0, 4 * sizeof *apairs);
    if (posix_memalign((void **)&spare.data, 64, 64)) /* SPARE */
        return 1;
    memset(spare.data, 0, 64);
    long *split =
        aligned_alloc(64, 64); /* SPLIT */
    memset(split, 0, 64);
    halves = split;
    pthread_t t[2];
    for (long k = 0; k < 2; ++k)
        pthread_create(&t[k], 0, work, (void *)k);
    for (int k = 0; k < 2; ++k)
        pthread_join(t[k], 0);
    printf("%ld %ld %ld %ld\n", hist.n + hist.bins[3], queue.head + queue.count,
           pairs[0].b + pairs[1].a + counts[1] + counts[2] + payload[0].b + payload[1].a,
           vector->data[1] + vector->data[2] + message->data[20] + message->data[28] + sums[3] +
               sums[4]);
    free(p);
    free(c);
    free(m);
    free(v->data);
    free(v);
    free(sums);
    free(merged);
    free(apairs);
    free(spare.data);
    free(split);
    free(before);
    return 0;
}
