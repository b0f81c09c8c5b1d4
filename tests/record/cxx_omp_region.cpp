/* A parallel region written in a member function of a class in a namespace, called from a
 * lambda: reports must name its code after that member function, `ns::Acc::run(long) (OpenMP
 * region)`, whichever compiler outlined it (g++ `_ZN2ns3Acc3runEl._omp_fn.0`, clang++
 * `.omp_outlined.` around `.omp_outlined._debug__`). Threads write neighbouring elements of
 * `part`: one false-sharing finding. */
#include <omp.h>

#include <cstdio>

namespace ns {
struct alignas(64) Acc { // part[0] and part[1] share a line wherever `a` lands
    volatile long part[8] = {0};
    long run(long n) {
#pragma omp parallel num_threads(2)
        {
            int t = omp_get_thread_num();
            for (long i = 0; i < n; i++)
                part[t] += i & 3; /* REGION_WRITE */
        }
        return part[0] + part[1];
    }
};
} // namespace ns

int main() {
    ns::Acc a;
    auto sum = [&](long n) { return a.run(n); };
    std::printf("sum=%ld\n", sum(100000));
    return 0;
}
