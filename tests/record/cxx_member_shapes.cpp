// Shared objects of the shapes whose members a false-sharing finding must name one by one
// (tests/record_programs.rs): a union written through its struct view, an array whose
// elements two threads take in turn, a ring whose consumer polls one member and now and then
// writes another, a class with two base classes, and a heap array from new[] of a type with a
// destructor (new[] stores the element count in front of the elements); bit-fields beside a
// member, runs across parts of neighbouring elements, a load over bytes the thread then
// writes, a class with a vtable, one object from new, an array held by a unique_ptr and a
// struct whose flexible array member takes the rest of its block, and packed bit-fields
// that straddle their storage unit (clang describes them with a negative bit offset).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

union alignas(64) Pair {
    long whole;
    struct {
        int lo;
        int hi;
    } parts;
};
Pair pair;

alignas(64) long cyclic[8];

struct alignas(64) Ring {
    long head;
    long tail;
    long polls;
};
Ring ring;

struct Produced {
    long produced;
};
struct Consumed {
    long consumed;
};
struct alignas(64) Stage : Produced, Consumed {
    long id;
};
Stage stage;

struct Worker {
    long id;
    long done;
    ~Worker() { id = -1; }
};

alignas(64) long seen[2];

struct alignas(64) Bits {
    int x;
    unsigned f1 : 3, f2 : 4;
    long pad;
    long y;
};
Bits bits;

struct __attribute__((packed)) Packed {
    char c;
    unsigned v : 20, w : 12;
    short s;
};
alignas(64) Packed packed[8];

struct KV {
    int key;
    int val;
};
alignas(64) KV kv[8];

struct alignas(64) Overlap {
    long a;
    int q[8];
};
Overlap overlap;

struct alignas(64) Shape {
    virtual ~Shape() {}
    virtual long area() const { return w; }
    long w = 1;
    long h = 0;
};
Shape shape;
Shape *volatile shape_ref = &shape;

struct Node {
    int id;
    int pad;
    long total;
    char rest[112];
};

struct Stat {
    long a;
    long b;
};

struct Hist {
    long n;
    long bins[]; // a GNU extension in C++, as in C99
};

int main()
{
    Worker *workers = new Worker[8](); // WORKERS
    Node *node = new Node(); // NODE
    std::unique_ptr<Stat[]> stats(new Stat[8]()); // STATS
    Hist *hist = static_cast<Hist *>(aligned_alloc(64, 64)); // HIST
    std::memset(hist, 0, 64);
    auto work = [workers, node, &stats, hist](int k) {
        long polled = 0;
        for (int i = 0; i < 100000; ++i) {
            if (k == 0) {
                pair.parts.lo++;
                ring.head++;
                stage.produced++;
                bits.x++;
                bits.f2++;
                kv[0].val++;
                kv[1].key++;
                overlap.a++;
                shape.h++;
                node->id++;
                stats[0].a++;
                hist->n++;
                hist->bins[0]++;
                packed[0].w++;
            } else {
                pair.parts.hi++;
                polled += *(volatile long *)&ring.tail;
                if (i % 1000 == 0)
                    ring.polls++;
                stage.consumed++;
                bits.y++;
                kv[3].key++;
                kv[3].val++;
                kv[4].key++;
                kv[4].val++;
                kv[5].key++;
                long v;
                std::memcpy(&v, &overlap.q[3], sizeof v);
                overlap.q[4] = int(v);
                polled += shape_ref->area() - 1;
                node->total++;
                stats[0].b++;
                hist->bins[1]++;
                packed[2].s++;
            }
            cyclic[2 * (i % 4) + k]++;
            workers[2 * (i % 4) + k].done++;
            asm volatile("" ::: "memory");
        }
        seen[k] = polled;
    };
    std::thread a(work, 0), b(work, 1);
    a.join();
    b.join();
    long sum = pair.parts.lo + pair.parts.hi + ring.head + stage.produced + stage.consumed;
    for (int j = 0; j < 8; ++j)
        sum += cyclic[j] + workers[j].done;
    std::printf("%ld %ld\n", sum, seen[1]);
    delete[] workers;
    delete node;
    std::free(hist);
    return 0;
}
