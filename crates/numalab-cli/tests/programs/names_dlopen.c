/* Loads the stripped library of names_lib.c with dlopen, as Python loads
 * an extension module, and allocates through it, for
 * crates/numalab-cli/tests/host/profile_names.rs: a site in an object the
 * program does not have at start, in `profile`, `--regions` and plans. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: names_dlopen LIBRARY\n");
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "names_dlopen: %s\n", dlerror());
        return 1;
    }
    char *(*lib_alloc)(size_t) = (char *(*)(size_t))dlsym(lib, "lib_alloc");
    if (!lib_alloc) {
        fprintf(stderr, "names_dlopen: %s\n", dlerror());
        return 1;
    }
    char *l = lib_alloc(3ul << 20);
    char *own = malloc(5ul << 20);
    memset(own, 1, 5ul << 20);
    long sum = 0;
    for (size_t i = 0; i < (3ul << 20); i += 4096)
        sum += l[i] + own[i];
    printf("sum %ld\n", sum);
    free(l);
    free(own);
    return 0;
}
