// A vector that grows by push_back: libstdc++ allocates in `_M_realloc_insert`, a template
// instantiated out of line in this program but written in a system header, so the heap
// blocks' allocation sites are library code and only their callers name this program's line.
#include <cstdio>
#include <vector>

struct Quad {
    long v[4];
};

int main() {
    std::vector<Quad> quads;
    for (long i = 0; i < 3; i++)
        quads.push_back(Quad{{i, 0, 0, 0}}); // PUSH_BACK
    std::printf("last=%ld\n", quads[2].v[0]);
    return 0;
}
