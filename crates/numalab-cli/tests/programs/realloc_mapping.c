/* Whether each big block glibc's malloc serves by a mapping of its own is
 * one kernel mapping (from its header page to its end), before and after
 * realloc grows it: glibc's realloc moves such a block with mremap, which
 * the kernel refuses on a range of two mappings, as a policy laid on the
 * block's pages alone made it (crates/numalab-cli/tests/host/plan.rs).
 * Prints one line per block, "SIZE one mapping" or "SIZE split", then the
 * blocks' byte sum, which must not change. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether [lo, hi) lies in one line of /proc/self/maps. */
static int one_mapping(uintptr_t lo, uintptr_t hi) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    char line[512];
    int one = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a <= lo && lo < b) {
            one = hi <= b;
            break;
        }
    }
    fclose(f);
    return one;
}

static void report(const char *what, unsigned char *p, size_t n) {
    /* The chunk's header is the 16 bytes before the block. */
    uintptr_t lo = (uintptr_t)p - 16, hi = (uintptr_t)p + n;
    printf("%s %zu %s\n", what, n, one_mapping(lo, hi) ? "one mapping" : "split");
}

int main(void) {
    size_t n = 3u << 20;
    unsigned char *p = malloc(n);
    if (!p) return 1;
    memset(p, 3, n);
    report("malloc", p, n);
    for (int i = 0; i < 3; i++) {
        n *= 2;
        p = realloc(p, n);
        if (!p) return 1;
        memset(p + n / 2, 3, n / 2);
        report("realloc", p, n);
    }
    unsigned long sum = 0;
    for (size_t i = 0; i < n; i += 4096) sum += p[i];
    printf("sum %lu\n", sum);
    free(p);
    return 0;
}
