/* Allocation sites in C for `numalab profile`'s names
 * (crates/numalab-cli/tests/host/profile_names.rs), built with and without -g
 * and with its debug information in a separate file: one in the program,
 * one in a stripped shared library (names_lib.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *lib_alloc(size_t n);

__attribute__((noinline)) static char *make_table(size_t n) {
    char *p = malloc(n); /* site:table */
    memset(p, 7, n);
    return p;
}

int main(void) {
    char *t = make_table(6ul << 20);
    char *l = lib_alloc(3ul << 20);
    long sum = 0;
    for (size_t i = 0; i < (3ul << 20); i += 4096)
        sum += t[i] + l[i];
    printf("sum %ld\n", sum);
    free(t);
    free(l);
    return 0;
}
