// Shared objects of the shapes whose members a false-sharing finding must name one by one
// (tests/record_programs.rs): a union written through its struct view, an array whose
// elements two threads take in turn, a ring whose consumer polls one member and now and then
// writes another, a class with two base classes, and a heap array from new[] of a type with a
// destructor (new[] stores the element count in front of the elements).
#include <cstdio>
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

int main()
{
    Worker *workers = new Worker[8](); // WORKERS
    auto work = [workers](int k) {
        long polled = 0;
        for (int i = 0; i < 100000; ++i) {
            if (k == 0) {
                pair.parts.lo++;
                ring.head++;
                stage.produced++;
            } else {
                pair.parts.hi++;
                polled += *(volatile long *)&ring.tail;
                if (i % 1000 == 0)
                    ring.polls++;
                stage.consumed++;
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
    return 0;
}
