// Heap blocks assigned to a member path whose first name several variables share
// (tests/record_programs.rs): the one the statement sees names the block. A global used by a
// function inlined into a block whose local has that name (`v`), a local declared after the
// statement in the same block (`w`), an inner block's own local (`p`); and blocks that must
// stay byte offsets: nested in another call (`wrap(aligned_alloc(…))`, which gcc places at
// `wrap`), hidden by a macro that offsets it, and a header an allocating function keeps in a
// member while it returns the bytes past it.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct bytes {
    char *data;
};
struct longs {
    long *data;
};
struct hdr {
    long refcnt, size;
};
struct owner {
    struct hdr *h;
};

struct longs *v;
struct longs *w;
struct longs *wrapped;
struct longs *hidden;
struct longs *inner;
struct owner own;
long *payload;

#define ALLOC_SKIP(n) ((long *)aligned_alloc(64, n) + 1)

__attribute__((noinline)) static long *wrap(void *p)
{
    return (long *)p + 1;
}

static inline void init_global(void)
{
    v->data = aligned_alloc(64, 64); /* INLINED_GLOBAL */
}

__attribute__((noinline)) static void *header_alloc(struct owner *o, size_t n)
{
    o->h = aligned_alloc(64, sizeof(struct hdr) + n); /* MEMBER_HEADER */
    o->h->refcnt = 1;
    o->h->size = n;
    return o->h + 1;
}

static void *work(void *arg)
{
    long k = (long)arg;
    for (int i = 0; i < 100000; ++i) {
        v->data[1 + k]++;
        w->data[1 + k]++;
        inner->data[1 + k]++;
        wrapped->data[1 + k]++;
        hidden->data[1 + k]++;
        payload[k]++;
        __asm__ volatile("" ::: "memory");
    }
    return NULL;
}

static struct longs gv, gw, gwrapped, ghidden, ginner;

int main(void)
{
    v = &gv;
    w = &gw;
    wrapped = &gwrapped;
    hidden = &ghidden;
    {
        struct bytes b = { 0 };
        struct bytes *volatile vb = &b;
        struct bytes *v = vb;
        init_global();
        printf("%d ", v->data == 0);
    }
    {
        w->data = aligned_alloc(64, 64); /* LATE_LOCAL */
        struct bytes *w = malloc(sizeof *w);
        printf("%d ", w != 0);
        free(w);
    }
    {
        struct longs *p = &ginner;
        p->data = aligned_alloc(64, 64); /* INNER */
        inner = p;
    }
    {
        struct bytes *p = malloc(sizeof *p);
        free(p);
    }
    wrapped->data = wrap(aligned_alloc(64, 64)); /* WRAPPED */
    hidden->data = ALLOC_SKIP(64); /* HIDDEN */
    payload = header_alloc(&own, 48);
    for (int i = 0; i < 7; i++)
        v->data[i] = w->data[i] = inner->data[i] = wrapped->data[i] = hidden->data[i] = 0;
    for (int i = 0; i < 6; i++)
        payload[i] = 0;
    pthread_t t[2];
    for (long k = 0; k < 2; ++k)
        pthread_create(&t[k], 0, work, (void *)k);
    for (int k = 0; k < 2; ++k)
        pthread_join(t[k], 0);
    printf("%ld %ld %ld %ld %ld %ld\n", v->data[1] + v->data[2], w->data[1] + w->data[2],
           inner->data[1] + inner->data[2], wrapped->data[1] + wrapped->data[2],
           hidden->data[1] + hidden->data[2], payload[0] + payload[1]);
    return 0;
}
