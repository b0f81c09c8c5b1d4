// Links cxx_ctor_lib.cpp's library (tests/record_programs.rs).
#include <cstdio>

struct Node {
    long a, b;
};
extern Node *ctor_node;
static void *volatile sink;

int main()
{
    Node *mine = new Node{3, 4};                                // NEW_MAIN
    sink = mine;
    std::printf("mine=%p sum=%ld\n", (void *)mine, ctor_node->a + mine->b);
    delete mine;
    return 0;
}
