// A C++ program whose only use of the C++ library is `new` (no delete, no stream): the
// shim's operator new satisfies the reference, and without `cachescope cc` keeping libstdc++
// linked, `--as-needed` would drop it and the program would abort at its first `new`.
#include <cstdio>

// The block escapes, so the compiler cannot elide the allocation.
long *volatile kept;

int main()
{
    kept = new long[4]();
    kept[1] = 41;
    std::printf("%ld\n", kept[1] + 1);
    return 0;
}
