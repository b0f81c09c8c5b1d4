// Two std::threads count into their own element of a member array of a local struct
// (tests/record_programs.rs): the finding names the object (`local t of main`) and, from the
// DWARF type, the member each thread writes: `t.per_thread[0].hits`, `t.per_thread[1].hits`.
#include <cstdio>
#include <thread>

struct Stats {
    long hits;
    long misses;
};

struct alignas(64) Table { // one line: the two counters always share it
    int id;
    Stats per_thread[2];
};

int main()
{
    Table t{}; // TABLE
    auto count = [&t](int k) {
        for (int i = 0; i < 100000; ++i) {
            t.per_thread[k].hits++; // COUNT
            asm volatile("" ::: "memory");
        }
    };
    std::thread a(count, 0), b(count, 1);
    a.join();
    b.join();
    std::printf("%ld\n", t.per_thread[0].hits + t.per_thread[1].hits);
    return 0;
}
