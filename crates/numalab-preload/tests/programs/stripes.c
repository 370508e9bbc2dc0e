/* Where a program's memory went, asked of the kernel (move_pages), for
 * `numalab run --mem interleave:NODES@PAGES` and `weighted:` in the guests:
 *
 * - big: one 16 MiB malloc, written by the main thread;
 * - brk: 4096 blocks of 512 bytes from the main thread (the break heap);
 * - arena T: 4096 blocks of 512 bytes from each of 4 threads (malloc gives
 *   each its own arena, an mmapped heap).
 *
 * `stripes remap` instead maps 1 MiB, grows it to 4 MiB with mremap
 * (MREMAP_MAYMOVE), shrinks it in place to 2 MiB, unmaps 256 KiB in its
 * middle and checks every byte: what a program that calls mremap itself
 * does on a striped mapping (one mapping per stripe, which mremap alone
 * refuses with EFAULT). Its line is "remap ..." for the 2 MiB kept, then
 * "remap ok".
 *
 * `stripes advise` maps 1 MiB, drops its second quarter with
 * madvise(MADV_DONTNEED) (which must then read as zeros and fault again,
 * still striped), then forks: the child checks every byte and writes its
 * own copy (copy on write), the parent checks that its bytes did not
 * change. Its lines: "advise ..." for the 1 MiB, "advise ok", "fork ok".
 *
 * Each line: "NAME pages P nodes N:K,N:K... runs R1,R2,..." (the lengths
 * of the runs of consecutive pages on one node, in address order; for the
 * blocks, their distinct pages in address order). Exits 0 when every
 * page was found. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG (16 << 20)
#define BLOCKS 4096
#define BLOCK 512
#define THREADS 4
#define MAX_PAGES 8192

static long page;
static int missing;

static int cmp(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

/* The nodes of `n` pages (sorted, distinct), printed as a histogram and
 * run lengths. */
static void report(const char *name, uintptr_t *pages, int n) {
    static void *ptrs[MAX_PAGES];
    static int status[MAX_PAGES];
    int count[64] = {0};
    for (int i = 0; i < n; i++) ptrs[i] = (void *)pages[i];
    if (syscall(SYS_move_pages, 0, n, ptrs, NULL, status, 0) != 0) {
        printf("%s move_pages failed\n", name);
        missing++;
        return;
    }
    printf("%s pages %d nodes ", name, n);
    for (int i = 0; i < n; i++) {
        if (status[i] >= 0 && status[i] < 64)
            count[status[i]]++;
        else
            missing++;
    }
    const char *sep = "";
    for (int k = 0; k < 64; k++)
        if (count[k]) {
            printf("%s%d:%d", sep, k, count[k]);
            sep = ",";
        }
    printf(" runs ");
    int run = 1;
    for (int i = 1; i <= n; i++) {
        /* A run ends at a node change or a gap in the addresses. */
        if (i == n || status[i] != status[i - 1] || pages[i] != pages[i - 1] + page) {
            printf("%d", run);
            if (i < n) printf(",");
            run = 1;
        } else {
            run++;
        }
    }
    printf("\n");
}

/* The distinct pages of `n` blocks of BLOCK bytes. */
static int pages_of(void **blocks, int n, uintptr_t *out) {
    int k = 0;
    for (int i = 0; i < n && k < MAX_PAGES; i++) {
        uintptr_t p = (uintptr_t)blocks[i] & ~(uintptr_t)(page - 1);
        uintptr_t last = ((uintptr_t)blocks[i] + BLOCK - 1) & ~(uintptr_t)(page - 1);
        for (; p <= last && k < MAX_PAGES; p += page) out[k++] = p;
    }
    qsort(out, k, sizeof *out, cmp);
    int d = 0;
    for (int i = 0; i < k; i++)
        if (d == 0 || out[i] != out[d - 1]) out[d++] = out[i];
    return d;
}

static void *blocks[THREADS + 1][BLOCKS];
static pthread_barrier_t done;

static void *thread(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < BLOCKS; i++) {
        blocks[t][i] = malloc(BLOCK);
        memset(blocks[t][i], t + 1, BLOCK);
    }
    /* Every thread's blocks are alive together: each thread keeps its own
     * arena (a thread that ended could hand its arena to the next). */
    pthread_barrier_wait(&done);
    return NULL;
}

static int remap(uintptr_t *pages) {
    size_t mib = 1 << 20;
    unsigned char *p = mmap(NULL, mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(p, 1, mib);
    unsigned char *q = mremap(p, mib, 4 * mib, MREMAP_MAYMOVE);
    if (q == MAP_FAILED) {
        perror("remap: mremap grow");
        return 1;
    }
    memset(q + mib, 2, 3 * mib);
    if (mremap(q, 4 * mib, 2 * mib, 0) != q) {
        perror("remap: mremap shrink");
        return 1;
    }
    if (munmap(q + mib, mib / 4) != 0) {
        perror("remap: munmap");
        return 1;
    }
    for (size_t i = 0; i < 2 * mib; i++) {
        if (i >= mib && i < mib + mib / 4) continue;
        if (q[i] != (i < mib ? 1 : 2)) {
            printf("remap byte %zu is %d\n", i, q[i]);
            return 1;
        }
    }
    int n = 0;
    for (size_t off = 0; off < 2 * mib; off += page)
        if (off < mib || off >= mib + mib / 4) pages[n++] = (uintptr_t)q + off;
    report("remap", pages, n);
    printf("remap ok\n");
    return missing != 0;
}

/* Every byte of the 1 MiB at `p` as advise() left it: 3, the second
 * quarter 4 (dropped, read as 0, then written again). */
static int advised_bytes_ok(const unsigned char *p, size_t mib, const char *who) {
    for (size_t i = 0; i < mib; i++) {
        int want = (i >= mib / 4 && i < mib / 2) ? 4 : 3;
        if (p[i] != want) {
            printf("%s: byte %zu is %d, not %d\n", who, i, p[i], want);
            return 0;
        }
    }
    return 1;
}

static int advise(uintptr_t *pages) {
    size_t mib = 1 << 20;
    unsigned char *p = mmap(NULL, mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("advise: mmap");
        return 1;
    }
    memset(p, 3, mib);
    if (madvise(p + mib / 4, mib / 4, MADV_DONTNEED) != 0) {
        perror("advise: madvise");
        return 1;
    }
    for (size_t i = mib / 4; i < mib / 2; i++)
        if (p[i] != 0) {
            printf("advise: dropped byte %zu is %d\n", i, p[i]);
            return 1;
        }
    memset(p + mib / 4, 4, mib / 4);
    if (!advised_bytes_ok(p, mib, "advise")) return 1;
    int n = 0;
    for (size_t off = 0; off < mib; off += page) pages[n++] = (uintptr_t)p + off;
    report("advise", pages, n);
    printf("advise ok\n");
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        perror("advise: fork");
        return 1;
    }
    if (child == 0) {
        if (!advised_bytes_ok(p, mib, "fork child")) _exit(1);
        memset(p, 5, mib);
        _exit(p[mib - 1] == 5 ? 0 : 1);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("fork: the child failed (status %d)\n", status);
        return 1;
    }
    if (!advised_bytes_ok(p, mib, "fork parent")) return 1;
    printf("fork ok\n");
    return missing != 0;
}

int main(int argc, char **argv) {
    static uintptr_t pages[MAX_PAGES];
    page = sysconf(_SC_PAGESIZE);
    if (argc > 1 && strcmp(argv[1], "remap") == 0) return remap(pages);
    if (argc > 1 && strcmp(argv[1], "advise") == 0) return advise(pages);
    char *big = malloc(BIG);
    memset(big, 1, BIG);
    uintptr_t first = ((uintptr_t)big + page - 1) & ~(uintptr_t)(page - 1);
    int n = 0;
    for (uintptr_t p = first; p + page <= (uintptr_t)big + BIG && n < MAX_PAGES; p += page)
        pages[n++] = p;
    report("big", pages, n);

    for (int i = 0; i < BLOCKS; i++) {
        blocks[THREADS][i] = malloc(BLOCK);
        memset(blocks[THREADS][i], 9, BLOCK);
    }
    report("brk", pages, pages_of(blocks[THREADS], BLOCKS, pages));

    pthread_t th[THREADS];
    pthread_barrier_init(&done, NULL, THREADS + 1);
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, thread, (void *)(intptr_t)t);
    pthread_barrier_wait(&done);
    for (int t = 0; t < THREADS; t++) {
        char name[32];
        snprintf(name, sizeof name, "arena%d", t);
        report(name, pages, pages_of(blocks[t], BLOCKS, pages));
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    printf("missing %d\n", missing);
    return missing != 0;
}
