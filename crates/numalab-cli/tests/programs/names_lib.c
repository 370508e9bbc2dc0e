/* A shared library for crates/numalab-cli/tests/host/profile_names.rs, stripped
 * of every symbol but its exports: the allocation is in `fill_new`, a
 * static function placed right after the tiny exported `lib_tiny`, so the
 * nearest exported symbol before the allocation's call is `lib_tiny`,
 * which does not hold it (built with -fno-toplevel-reorder to keep this
 * order). */
#include <stdlib.h>
#include <string.h>

int lib_tiny(void) { return 7; }

__attribute__((noinline)) static char *fill_new(size_t n) {
    char *p = malloc(n);
    memset(p, 5, n);
    return p;
}

char *lib_alloc(size_t n) { return fill_new(n); }
