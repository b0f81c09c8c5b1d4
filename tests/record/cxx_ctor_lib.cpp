// A C++ library whose global constructor allocates before the recorder starts
// (tests/record_programs.rs): the note its `new` leaves must not name a later block.
struct Node {
    long a, b;
};
Node *ctor_node = new Node{1, 2};
