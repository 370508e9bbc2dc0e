/* small_nodes N: a linked list of N 64-byte nodes, each from make_node
 * (a site a plan can name), for `run --plan` with `"small": true`
 * (tests/plan.rs). Then what a program does with small blocks: read
 * their usable size, free every other node and make it again, grow one
 * with realloc past a page and another within its size, and clear one
 * with calloc. Prints "ok nodes N" when every value read back is the one
 * written, else what differed, and exits 1. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
    struct node *next;
    long value;
    char pad[48];
};

__attribute__((noinline)) static struct node *make_node(long value) {
    struct node *n = malloc(sizeof *n);
    if (!n)
        return NULL;
    n->value = value;
    n->next = NULL;
    return n;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: small_nodes N\n");
        return 2;
    }
    long count = atol(argv[1]);
    struct node **all = calloc(count, sizeof *all);
    if (!all)
        return 1;
    for (long i = 0; i < count; i++) {
        all[i] = make_node(i);
        if (!all[i])
            return 1;
        if (i > 0)
            all[i - 1]->next = all[i];
    }
    if (malloc_usable_size(all[0]) < sizeof(struct node)) {
        printf("usable size %zu\n", malloc_usable_size(all[0]));
        return 1;
    }
    for (long i = 0; i < count; i += 2) {
        free(all[i]);
        all[i] = make_node(i);
    }
    /* Grown within its size: the same block; past a page: moved, contents kept. */
    struct node *same = realloc(all[1], 40);
    struct node *grown = realloc(all[3], 8192);
    if (!same || !grown || same->value != 1 || grown->value != 3) {
        printf("realloc lost the contents\n");
        return 1;
    }
    all[1] = same;
    all[3] = grown;
    long sum = 0;
    for (long i = 0; i < count; i++)
        sum += all[i]->value;
    if (sum != count * (count - 1) / 2) {
        printf("sum %ld\n", sum);
        return 1;
    }
    char *zero = calloc(1, 100);
    for (int i = 0; i < 100; i++)
        if (zero[i]) {
            printf("calloc gave a non-zero byte\n");
            return 1;
        }
    for (long i = 0; i < count; i++)
        free(all[i]);
    free(zero);
    free(all);
    printf("ok nodes %ld\n", count);
    return 0;
}
