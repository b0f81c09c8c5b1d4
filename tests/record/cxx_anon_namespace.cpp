// Per-thread counters in an anonymous namespace (tests/record_programs.rs): g++ gives `work`
// no linkage name in DWARF and the Rust demangler reads the global's symbol as
// `_GLOBAL__N_1::counters`; the audit must say `(anonymous namespace)::…` as C++ tools do.
#include <cstdio>
#include <thread>

namespace {
long counters[2]; // COUNTERS
__attribute__((noinline)) void work(int t)
{
    for (int i = 0; i < 100000; ++i) {
        counters[t]++; // WORK
        asm volatile("" ::: "memory");
    }
}
} // namespace

int main()
{
    std::thread a(work, 0), b(work, 1);
    a.join();
    b.join();
    std::printf("%ld\n", counters[0] + counters[1]);
    return 0;
}
