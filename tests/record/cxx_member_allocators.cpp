// Heap blocks whose layout depends on the allocator the line called, for the members a
// false-sharing finding names (tests/record_programs.rs): one object of a derived class
// through a pointer to its base (new, not new[]: no element count, no array), an array of a
// 24-byte struct from aligned_alloc rounded up to 128 bytes (a C allocator: no count in
// front, whatever the size), the rows of a vector of vectors (allocated on the line that
// declares the outer vector, but not its elements) and a std::vector<bool> (words, not bools).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

struct Base {
    virtual ~Base() {}
    long id = 0;
};

struct alignas(64) Derived : Base {
    long extra = 0;
    long more = 0;
};

struct Triple {
    long a, b, c;
};

int main()
{
    Base *shape = new Derived(); // DERIVED
    Derived *derived = static_cast<Derived *>(shape);
    Triple *triples = static_cast<Triple *>(aligned_alloc(64, 128)); // TRIPLES
    std::memset(triples, 0, 128);
    std::vector<std::vector<long>> rows(4, std::vector<long>(1)); // ROWS
    std::vector<bool> flags(4096); // FLAGS
    auto work = [&](int k) {
        for (int i = 0; i < 100000; ++i) {
            if (k == 0) {
                shape->id++;
                triples[0].c++;
                flags[1024 + i % 64] = i & 1; // words 16 and 17: lines no row shares
            } else {
                derived->more++;
                triples[1].a++;
                flags[1088 + i % 64] = i & 1;
            }
            rows[k][0]++;
            rows[k + 2][0]++;
            asm volatile("" ::: "memory");
        }
    };
    std::thread a(work, 0), b(work, 1);
    a.join();
    b.join();
    long sum = shape->id + derived->more + triples[0].c + triples[1].a;
    for (auto &row : rows)
        sum += row[0];
    std::printf("%ld %d\n", sum, int(flags[1024]) + int(flags[1088]));
    delete shape;
    std::free(triples);
    return 0;
}
