// Heap blocks a statement stores in a member, named after the member path as written
// (tests/record_programs.rs): `this->cells` in a constructor, `holder->t.data` through a
// member object (whose name another class uses with another type), a node hung off another
// node (`holder->head->next`, one object: `->id`), members a constructor's initializer list
// sets (`slots(new long[n]())`, and on a line of its own, `free_list(static_cast<int *>(…))`),
// a data member a member function names without `this->` (`cfg->data`, though a global
// `cfg` of another type exists), and vectors grown by a method on a line of their own
// (`accs.resize(4)`, `st.hits.assign(8, 0)`, `grown.push_back(0)`), though a lambda captures
// them. Byte offsets for an element's member (`slots[i].counts`: which element is not
// written in the source) and a lambda's capture (`lv->data`: DWARF's closure members are
// not the source's names).
#include <pthread.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

struct Grid {
    double *cells;
    long n;
    explicit Grid(long size) : n(size)
    {
        this->cells = new double[size](); /* THIS_CELLS */
    }
    ~Grid() { delete[] cells; }
};

struct Table {
    int *data;
};

struct Bytes {
    char data[4];
};

struct Node {
    long id, hits;
    Node *next;
};

struct Holder {
    Table t;
    Node *head;
};

struct Ring {
    long head;
    long *slots;
    explicit Ring(long n) : head(0), slots(new long[n]()) {} /* RING_BUFFER */
    ~Ring() { delete[] slots; }
};

struct Pool {
    int *free_list;
    Pool()
        : free_list(static_cast<int *>(calloc(16, sizeof(int)))) /* POOL */
    {
    }
    ~Pool() { free(free_list); }
};

struct Chars {
    char *data;
};
struct Longs {
    long *data;
};
Chars *cfg;

struct Engine {
    Longs *cfg;
    __attribute__((noinline)) void init() { cfg->data = new long[8](); } /* IMPLICIT_THIS */
};
Engine engine;
Longs engine_cfg;
Longs *lambda_longs;

struct Acc {
    long sum, n;
};
struct Stats {
    std::vector<long> hits;
};
std::vector<Acc> *accs_seen;
Stats *stats_seen;
std::vector<long> *grown_seen;

struct Slots {
    long *counts;
};

Grid *grid;
Holder *holder;
Bytes bytes = {{1, 2, 3, 4}};
Slots slots[2];
Ring *ring;
Pool *pool;

static void *work(void *arg)
{
    long k = reinterpret_cast<long>(arg);
    for (int i = 0; i < 100000; ++i) {
        if (k == 0) {
            grid->cells[1] += 1;
            holder->t.data[2]++;
            holder->head->next->id++;
            slots[0].counts[1]++;
            ring->slots[1]++;
            pool->free_list[2]++;
            engine.cfg->data[1]++;
            lambda_longs->data[1]++;
            (*accs_seen)[0].n++;
            stats_seen->hits[1]++;
            (*grown_seen)[1]++;
        } else {
            grid->cells[2] += 1;
            holder->t.data[3]++;
            holder->head->next->hits++;
            slots[0].counts[2]++;
            ring->slots[2]++;
            pool->free_list[3]++;
            engine.cfg->data[2]++;
            lambda_longs->data[2]++;
            (*accs_seen)[1].n++;
            stats_seen->hits[2]++;
            (*grown_seen)[2]++;
        }
        __asm__ volatile("" ::: "memory");
    }
    return nullptr;
}

int main()
{
    grid = new Grid(8);
    holder = new Holder();
    holder->t.data = static_cast<int *>(aligned_alloc(64, 64)); /* TABLE_DATA */
    for (int i = 0; i < 16; ++i)
        holder->t.data[i] = 0;
    holder->head = new Node();
    holder -> head -> next = new Node(); /* NEXT */
    for (int i = 0; i < 2; ++i)
        slots[i].counts = static_cast<long *>(aligned_alloc(64, 64)); /* SLOTS */
    for (int i = 0; i < 8; ++i)
        slots[0].counts[i] = 0;
    engine.cfg = &engine_cfg;
    engine.init();
    Longs *lv = new Longs();
    auto attach = [&] { lv->data = new long[8](); }; /* LAMBDA */
    attach();
    lambda_longs = lv;
    std::vector<Acc> accs;
    accs.resize(4); /* RESIZE */
    Stats st;
    st.hits.assign(8, 0); /* ASSIGN */
    std::vector<long> grown;
    for (int i = 0; i < 8; ++i)
        grown.push_back(0); /* PUSH */
    auto count = [&] { return accs.size() + st.hits.size() + grown.size(); };
    accs_seen = &accs;
    stats_seen = &st;
    grown_seen = &grown;
    ring = new Ring(8);
    pool = new Pool();
    pthread_t t[2];
    for (long k = 0; k < 2; ++k)
        pthread_create(&t[k], nullptr, work, reinterpret_cast<void *>(k));
    for (int k = 0; k < 2; ++k)
        pthread_join(t[k], nullptr);
    Node *next = holder->head->next;
    std::printf("%.0f %d %ld %ld %d %ld %d\n", grid->cells[1] + grid->cells[2],
                holder->t.data[2] + holder->t.data[3], next->id + next->hits,
                slots[0].counts[1] + slots[0].counts[2], bytes.data[3],
                ring->slots[1] + ring->slots[2], pool->free_list[2] + pool->free_list[3]);
    std::printf("%ld %ld %d\n", engine.cfg->data[1] + engine.cfg->data[2],
                lv->data[1] + lv->data[2], cfg == nullptr);
    std::printf("%ld %ld %ld %zu\n", accs[0].n + accs[1].n, st.hits[1] + st.hits[2],
                grown[1] + grown[2], count());
    for (int i = 0; i < 2; ++i)
        free(slots[i].counts);
    delete next;
    delete holder->head;
    free(holder->t.data);
    delete holder;
    delete grid;
    delete ring;
    delete[] engine.cfg->data;
    delete[] lv->data;
    delete lv;
    delete pool;
    return 0;
}
