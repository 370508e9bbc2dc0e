/* The worst case for numalab profile's interposed allocator: one thread that
 * does nothing but malloc and free small objects (N pairs, 16 to 215 bytes,
 * 64 live at a time). docs/profile.md ("The interposed allocator's own cost")
 * times it plain and under the preload library:
 *   gcc -O2 -o mall bench/malloc-churn.c && time ./mall 30000000 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0;
    if (n <= 0) {
        fprintf(stderr, "usage: %s PAIRS (a whole number from 1)\n", argv[0]);
        return 2;
    }
    void *keep[64] = {0};
    unsigned long s = 0;
    for (long i = 0; i < n; i++) {
        int k = i & 63;
        free(keep[k]);
        keep[k] = malloc(16 + (i % 200));
        s += (unsigned long)keep[k] & 0xff;
    }
    printf("%lu\n", s & 1);
    for (int k = 0; k < 64; k++) free(keep[k]);
    return 0;
}
