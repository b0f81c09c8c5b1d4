// Per-thread counters written from lambdas run by std::thread (tests/record_programs.rs): g++
// inlines each lambda's body into std::thread's `_M_run`, and its DWARF names the inlined
// body `operator()` alone; the audit must name it after `main`, where it is written.
#include <cstdio>
#include <thread>
#include <vector>

struct Counter {
    volatile long n;
};
Counter counts[2];

int main()
{
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
        threads.emplace_back([t] {
            for (int i = 0; i < 100000; ++i)
                counts[t].n = counts[t].n + 1; // LAMBDA_WRITE
        });
    for (auto &th : threads)
        th.join();
    std::printf("%ld\n", counts[0].n + counts[1].n);
    return 0;
}
