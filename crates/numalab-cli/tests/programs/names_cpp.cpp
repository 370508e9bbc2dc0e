// Allocation sites in C++ for `numalab profile`'s names
// (crates/numalab-cli/tests/profile_names.rs): overloads in a namespace and
// a class, a same-named function elsewhere, an allocation through
// `operator new[]`. Each allocation's line carries a `site:` marker the
// test finds; the sizes tell the regions apart.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ns {
struct Alloc {
    static char *Make(unsigned long n);
    static char *Make(unsigned long n, int fill);
};

__attribute__((noinline)) char *Alloc::Make(unsigned long n) {
    char *p = static_cast<char *>(malloc(n)); // site:make1
    memset(p, 1, n);
    return p;
}

__attribute__((noinline)) char *Alloc::Make(unsigned long n, int fill) {
    char *p = static_cast<char *>(malloc(n)); // site:make2
    memset(p, fill, n);
    return p;
}
} // namespace ns

namespace other {
__attribute__((noinline)) char *Make(unsigned long n) {
    char *p = new char[n]; // site:other
    memset(p, 3, n);
    return p;
}
} // namespace other

int main() {
    char *a = ns::Alloc::Make(8ul << 20);
    char *b = ns::Alloc::Make(4ul << 20, 2);
    char *c = other::Make(2ul << 20);
    long sum = 0;
    for (unsigned long i = 0; i < (2ul << 20); i += 4096)
        sum += a[i] + b[i] + c[i];
    printf("sum %ld\n", sum);
    free(a);
    free(b);
    delete[] c;
    return 0;
}
