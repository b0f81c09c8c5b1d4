// Heap blocks whose layout depends on the allocator the line called, for the members a
// false-sharing finding names (tests/record_programs.rs): one object of a derived class
// through a pointer to its base (new, not new[]: no element count, no array), an array of a
// 24-byte struct from aligned_alloc rounded up to 128 bytes (a C allocator: no count in
// front, whatever the size), the rows of a vector of vectors (allocated on the line that
// declares the outer vector, but not its elements), a std::vector<bool> (words, not bools),
// new[] of an 8-byte type with a destructor (the count in front is one element long, the size
// a whole number of elements) and a class with two bases through a pointer to the second.
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

struct Slot {
    long v = 0;
    ~Slot() { v = -1; }
};

struct First {
    long first = 0;
};
struct alignas(64) Second {
    long s1 = 0;
    long s2 = 0;
};
struct Both : First, Second {
    long own = 0;
};

int main()
{
    Base *shape = new Derived(); // DERIVED
    Derived *derived = static_cast<Derived *>(shape);
    Triple *triples = static_cast<Triple *>(aligned_alloc(64, 128)); // TRIPLES
    std::memset(triples, 0, 128);
    std::vector<std::vector<long>> rows(4, std::vector<long>(1)); // ROWS
    std::vector<bool> flags(4096); // FLAGS
    Slot *slots = new Slot[7]; // SLOTS
    Second *second = new Both(); // BOTH
    auto work = [&](int k) {
        for (int i = 0; i < 100000; ++i) {
            if (k == 0) {
                shape->id++;
                triples[0].c++;
                flags[1024 + i % 64] = i & 1; // words 16 and 17: lines no row shares
                slots[2].v++;
                second->s2++;
            } else {
                derived->more++;
                triples[1].a++;
                flags[1088 + i % 64] = i & 1;
                slots[3].v++;
                static_cast<Both *>(second)->own++;
            }
            rows[k][0]++;
            rows[k + 2][0]++;
            asm volatile("" ::: "memory");
        }
    };
    std::thread a(work, 0), b(work, 1);
    a.join();
    b.join();
    long sum = shape->id + derived->more + triples[0].c + triples[1].a + slots[2].v +
               slots[3].v + second->s2 + static_cast<Both *>(second)->own;
    for (auto &row : rows)
        sum += row[0];
    std::printf("%ld %d\n", sum, int(flags[1024]) + int(flags[1088]));
    delete shape;
    delete[] slots;
    delete static_cast<Both *>(second);
    std::free(triples);
    return 0;
}
