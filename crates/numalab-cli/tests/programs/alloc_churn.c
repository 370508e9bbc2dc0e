/* Allocations of every kind a program makes, from two threads, through
 * whatever allocator it is linked with (crates/numalab-cli/tests/host/
 * real_programs.rs links it with jemalloc, tcmalloc and mimalloc): malloc
 * from 16 bytes to 8 MiB, calloc, realloc growing and shrinking,
 * posix_memalign and aligned_alloc, malloc_usable_size, frees in another
 * order. Each block is filled and checked; prints the checksum of every
 * byte written, which must not depend on how the memory was placed. */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCKS 512

static uint64_t churn(unsigned seed) {
    unsigned char *b[BLOCKS] = {0};
    size_t n[BLOCKS] = {0};
    uint64_t sum = 0, x = seed * 2654435761u + 1;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < BLOCKS; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t size = (size_t)16 << (x % 20); /* 16 B to 8 MiB */
            size += x % 61;
            if (b[i] && x % 3 == 0) {
                unsigned char *q = realloc(b[i], size);
                if (!q) return 0;
                if (size > n[i]) memset(q + n[i], (int)(i & 0xff), size - n[i]);
                b[i] = q, n[i] = size;
            } else {
                free(b[i]);
                void *q = NULL;
                switch (x % 4) {
                case 0: q = malloc(size); break;
                case 1: q = calloc(1, size); break;
                case 2: if (posix_memalign(&q, 64, size)) q = NULL; break;
                default: q = aligned_alloc(4096, (size + 4095) & ~(size_t)4095); break;
                }
                if (!q) return 0;
                if (malloc_usable_size(q) < size) return 0;
                b[i] = q, n[i] = size;
                memset(b[i], (int)(i & 0xff), size);
            }
        }
        for (int i = 0; i < BLOCKS; i++)
            for (size_t k = 0; k < n[i]; k += 251) sum += b[i][k] ^ (k & 7);
    }
    for (int i = BLOCKS - 1; i >= 0; i--) free(b[i]);
    return sum;
}

static void *worker(void *arg) {
    uint64_t *out = arg;
    *out = churn(7);
    return NULL;
}

int main(void) {
    pthread_t t;
    uint64_t other = 0;
    if (pthread_create(&t, NULL, worker, &other)) return 1;
    uint64_t mine = churn(3);
    pthread_join(t, NULL);
    if (!mine || !other) {
        printf("allocation failed\n");
        return 1;
    }
    printf("sums %llu %llu\n", (unsigned long long)mine, (unsigned long long)other);
    return 0;
}
