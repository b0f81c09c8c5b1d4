// A member function's local array whose elements two std::threads write (tests/
// record_programs.rs): the audit must name it after the member function at every optimization
// level. Optimized, `Runner::run` is inlined into `main`, whose frame then holds the array; its
// name sits only on the declaration in the class, and the local was named after `main`.
#include <cstdio>
#include <thread>

struct Runner {
    long run(int n)
    {
        volatile long partial[2] = {0, 0}; // MEMBER_LOCAL
        std::thread a([&] {
            for (int i = 0; i < n; ++i)
                partial[0] = partial[0] + 1;
        });
        std::thread b([&] {
            for (int i = 0; i < n; ++i)
                partial[1] = partial[1] + 1;
        });
        a.join();
        b.join();
        return partial[0] + partial[1];
    }
};

int main()
{
    Runner r;
    std::printf("%ld\n", r.run(100000));
    return 0;
}
