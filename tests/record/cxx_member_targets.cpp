// Heap blocks a statement assigns to a member, named after the member path as written
// (tests/record_programs.rs): `this->cells` in a constructor, `holder->t.data` through a
// member object (whose name another class uses with another type), a node hung off another
// node (`holder->head->next`, one object: `->id`), and an element's member (`slots[i].counts`),
// which stays byte offsets: which element is not written in the source.
#include <pthread.h>
#include <cstdio>
#include <cstdlib>

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
        } else {
            grid->cells[2] += 1;
            holder->t.data[3]++;
            holder->head->next->hits++;
            slots[0].counts[2]++;
            ring->slots[2]++;
            pool->free_list[3]++;
            engine.cfg->data[2]++;
            lambda_longs->data[2]++;
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
