// Two std::threads count into their own element of a std::vector (tests/record_programs.rs):
// the heap block's type is not recorded, but the line that allocates it declares the vector,
// whose element type names the members each thread writes: `stats[0].hits`, `stats[1].hits`.
#include <cstdio>
#include <thread>
#include <vector>

struct Pair {
    int hits;
    int misses;
};

int main()
{
    std::vector<Pair> stats(2); // STATS (16 bytes from operator new: one line)
    auto count = [&stats](int k) {
        for (int i = 0; i < 100000; ++i) {
            stats[k].hits++; // COUNT
            asm volatile("" ::: "memory");
        }
    };
    std::thread a(count, 0), b(count, 1);
    a.join();
    b.join();
    std::printf("%d\n", stats[0].hits + stats[1].hits);
    return 0;
}
