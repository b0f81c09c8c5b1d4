// C++ allocations through every form of operator new, for tests/record_programs.rs: each must
// be recorded with the line that says `new` (or declares the vector) as its site, and the
// program must behave the same with and without the shim, bad_alloc included.
#include <cstdio>
#include <new>
#include <vector>

struct Pair {
    long a, b;
};
struct alignas(128) Wide {
    long v[4];
};

// Escapes every pointer so that no allocation can be elided.
static void *volatile sink;

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? 3 : 5;
    Pair *one = new Pair{1, 2};                                 // NEW_ONE
    Pair *many = new Pair[n]();                                 // NEW_ARRAY
    std::vector<Pair> vec(n + 2);                               // NEW_VECTOR
    Pair *quiet = new (std::nothrow) Pair[n + 4]();             // NEW_NOTHROW
    Wide *wide = new Wide[2]();                                 // NEW_ALIGNED
    Wide *wide1 = new (std::nothrow) Wide();                    // NEW_ALIGNED_NOTHROW
    sink = one;
    sink = many;
    sink = vec.data();
    sink = quiet;
    sink = wide;
    sink = wide1;
    long sum = one->a + one->b + many[n - 1].a + vec[n + 1].b + quiet[0].a + wide[1].v[3] +
               wide1->v[0];
    // Too large for any machine: operator new throws (through no frame of the shim).
    volatile size_t huge = (size_t)1 << 58;
    int threw = 0;
    try {
        sink = new Pair[huge];                                  // NEW_HUGE
    } catch (const std::bad_alloc &) {
        threw = 1;
    }
    Pair *none = new (std::nothrow) Pair[huge];                 // NEW_HUGE_NOTHROW
    sink = none;
    std::printf("sum=%ld threw=%d nothrow_null=%d\n", sum, threw, none == nullptr);
    delete one;
    delete[] many;
    delete[] quiet;
    delete[] wide;
    delete wide1;
    return 0;
}
