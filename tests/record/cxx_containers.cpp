// Standard containers in an unoptimized build (-O0): nothing is inlined, so the allocation
// site is libstdc++'s `__new_allocator::allocate` and the line that asked for the block is
// seven or more frames of library templates further out (make_shared: allocator_traits,
// __allocate_guarded, __shared_count, __shared_ptr, shared_ptr, make_shared, main).
#include <cstdio>
#include <list>
#include <map>
#include <memory>
#include <unordered_map>

struct Acc {
    long v[2];
};

int main() {
    auto shared = std::make_shared<Acc>(); // MAKE_SHARED
    std::map<int, Acc> tree;
    tree[1].v[0] = 1; // MAP_INSERT
    std::unordered_map<int, Acc> hash;
    hash[2].v[0] = 2; // HASH_INSERT
    std::list<Acc> list;
    list.emplace_back(); // LIST_EMPLACE
    shared->v[1] = tree[1].v[0] + hash[2].v[0] + list.size();
    std::printf("sum=%ld\n", shared->v[1]); // PRINT
    return 0;
}
