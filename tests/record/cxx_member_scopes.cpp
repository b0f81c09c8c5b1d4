// Heap blocks whose naming depends on the scope the statement is in and on what it
// initialises (tests/record_programs.rs). Named: a static data member in a static member
// function (`cfg->data`, though a global `cfg` of another type exists), and a nested class's
// use of its enclosing class's static (`scfg->data`). Byte offsets: a declared pointer
// initialised with a call around the allocation (`wrap(calloc(…))`), past its start
// (`(long *)malloc(64) + 1`), or with a `new` around another (`new Wrapper(new long[8]())`),
// a `std::vector`'s storage through a pointer to the vector (`new std::vector<long>(8)`),
// a class's own `operator new[]`, whose caller's `new[]` adds a count in front, a row
// emplaced into a vector of vectors (`rows.emplace_back(8)`: the row's buffer, not `rows`'),
// a string emplaced into a vector of strings (built in the shared C++ library), and a default
// member initializer, which g++ places at the end of the constructor's last initializer
// (`d(new long[n]())`): never named `this->d`.
#include <pthread.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

struct Chars {
    char *data;
};
struct Longs {
    long *data;
};
Chars *cfg;
Chars *scfg;

struct Engine {
    static Longs *cfg;
    __attribute__((noinline)) static void init()
    {
        cfg->data = static_cast<long *>(calloc(8, sizeof(long))); /* STATIC_MEMBER */
    }
};
Longs *Engine::cfg;

struct Outer {
    static Longs *scfg;
    struct Inner {
        __attribute__((noinline)) static void init()
        {
            scfg->data = static_cast<long *>(calloc(8, sizeof(long))); /* ENCLOSING_STATIC */
        }
    };
};
Longs *Outer::scfg;

struct Wrapper {
    long pad[8];
    long *inner;
    explicit Wrapper(long *p) : inner(p) {}
};

struct Slot {
    long v;
    ~Slot() { v = -1; }
    static void *operator new[](size_t n)
    {
        Slot *p = static_cast<Slot *>(malloc(n)); /* CLASS_NEW */
        return p;
    }
    static void operator delete[](void *q) { free(q); }
};

struct Two {
    long *d;
    long *e = new long[8](); /* DEFAULT_INIT */
    explicit Two(int n) : d(new long[n]()) {}
};

__attribute__((noinline)) static long *wrap(void *p)
{
    return static_cast<long *>(p) + 1;
}

Longs engine_cfg, outer_cfg;
long *wrapped, *offset, *nested;
std::vector<long> *vec;
Slot *slots;
std::vector<std::vector<long>> *rows;
std::vector<std::string> *names;
Two *two;

static void *work(void *arg)
{
    long k = reinterpret_cast<long>(arg);
    for (int i = 0; i < 100000; ++i) {
        Engine::cfg->data[1 + k]++;
        Outer::scfg->data[1 + k]++;
        wrapped[1 + k]++;
        offset[1 + k]++;
        nested[1 + k]++;
        (*vec)[1 + k]++;
        slots[1 + k].v++;
        (*rows)[0][1 + k]++;
        (*names)[0][1 + k]++;
        two->e[1 + k]++;
        __asm__ volatile("" ::: "memory");
    }
    return nullptr;
}

int main()
{
    Engine::cfg = &engine_cfg;
    Engine::init();
    Outer::scfg = &outer_cfg;
    Outer::Inner::init();
    long *w = wrap(calloc(8, sizeof(long))); /* WRAPPED */
    long *o = static_cast<long *>(malloc(64)) + 1; /* OFFSET */
    Wrapper *n = new Wrapper(new long[8]()); /* NESTED */
    std::vector<long> *v = new std::vector<long>(8); /* VECTOR_POINTER */
    Slot *s = new Slot[8];
    std::vector<std::vector<long>> r;
    r.emplace_back(8); /* ROW */
    std::vector<std::string> strings;
    strings.emplace_back(40, 'a'); /* STRING */
    rows = &r;
    names = &strings;
    two = new Two(8);
    for (int i = 0; i < 7; ++i)
        w[i] = o[i] = 0;
    wrapped = w;
    offset = o;
    nested = n->inner;
    vec = v;
    slots = s;
    for (int i = 0; i < 8; ++i)
        slots[i].v = 0;
    pthread_t t[2];
    for (long k = 0; k < 2; ++k)
        pthread_create(&t[k], nullptr, work, reinterpret_cast<void *>(k));
    for (int k = 0; k < 2; ++k)
        pthread_join(t[k], nullptr);
    std::printf("%ld %ld %ld %ld %ld %ld %ld %d\n", Engine::cfg->data[1] + Engine::cfg->data[2],
                Outer::scfg->data[1] + Outer::scfg->data[2], w[1] + w[2], o[1] + o[2],
                nested[1] + nested[2], (*vec)[1] + (*vec)[2], slots[1].v + slots[2].v,
                cfg == scfg);
    std::printf("%ld %d %ld\n", r[0][1] + r[0][2], static_cast<unsigned char>(strings[0][1]),
                two->e[1] + two->e[2]);
    return 0;
}
