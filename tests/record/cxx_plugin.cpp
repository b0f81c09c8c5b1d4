// A C++ plugin that a C program loads with dlopen (tests/record_programs.rs): its operator new
// calls reach the shim, whose real operator new is in a libstdc++ loaded after start-up.
#include <new>
#include <vector>

extern "C" long plugin_sum(long n)
{
    std::vector<long> v(n);
    long *extra = new long[n]();
    long sum = 0;
    for (long i = 0; i < n; i++) {
        v[i] = i;
        extra[i] = v[i] * 2;
        sum += extra[i];
    }
    delete[] extra;
    return sum;
}
