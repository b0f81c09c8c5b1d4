// Per-thread std::atomic counters in one std::vector (tests/record_programs.rs): the writes are
// `fetch_add`s inlined from the C++ library's atomic_base.h; the audit must name the
// program's line that calls it, not the library header.
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

template <typename T> struct Counters {
    std::vector<std::atomic<T>> c;
    explicit Counters(int n) : c(n) {}
    void bump(int t, T v) { c[t].fetch_add(v, std::memory_order_relaxed); } // BUMP
};

int main()
{
    Counters<int> counters(2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; t++)
        threads.emplace_back([&counters, t] {
            for (int i = 0; i < 100000; i++)
                counters.bump(t, i & 1);
        });
    for (auto &th : threads)
        th.join();
    std::printf("%d\n", counters.c[0].load() + counters.c[1].load());
    return 0;
}
