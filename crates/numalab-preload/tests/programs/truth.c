/* Programs whose NUMA truth is known by construction, for the estimator of
 * `numalab profile` (the truth suite: docs/profile.md, "How the remote
 * share is estimated"). One access is one 8-byte load or store through a
 * volatile pointer, as the word counter counts them.
 *
 *     truth MODE [THREADS] [PASSES] [A_KIB]
 *
 * THREADS workers (default: one per CPU the process may use), worker i
 * pinned to the i-th allowed CPU (round robin when there are more workers
 * than CPUs). MODE:
 *
 *   instep      the main thread (pinned to the first CPU) first-touches A;
 *               every worker reads all of A from the same start, the
 *               workers in step (a barrier per pass); each also reads its
 *               own private array, first-touched by itself.
 *   leader      as instep, but worker 0 always goes first: the others read
 *               a chunk of A only once worker 0 has read it (a page-fault
 *               sample then always goes to worker 0).
 *   staggered   the same, each worker starting its pass of A at its own
 *               offset.
 *   random      the workers read random words of A (each the same count).
 *   slices      the workers read their own slice of S, which they
 *               first-touched themselves (partitioned: all local).
 *   prodcons    pairs: worker k of the first half (producer) writes a
 *               buffer, worker k of the second half (consumer, on other
 *               CPUs: other nodes where the CPUs are in node order) reads
 *               it, over a set of buffers handed back and forth; the
 *               buffers' pages are where the producers first wrote them.
 *   unequal     as instep, but the last worker reads A four times a pass.
 *   migrate     as instep, but worker 0 moves to the last allowed CPU
 *               halfway through its passes.
 *   falseshare  worker 0 and the last worker write two words of one cache
 *               line of F (first-touched by the main thread), all the time;
 *               the others read A as in staggered.
 *
 * Output (stdout), then exit 0 when every sum is right:
 *   region NAME 0xADDRESS BYTES
 *   truth NAME CPU_NODE MEMORY_NODE ACCESSES
 *   thread ORDINAL TID CPU NODE ACCESSES_OF_A
 * The truth counts come from each access's own page (its node read with
 * move_pages after the pages were placed), so they are exact whatever the
 * kernel did. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MB (1024 * 1024)
static size_t A_BYTES = 16 * MB;
#define PRIVATE_BYTES (1 * MB)
#define S_BYTES (16 * MB)
#define BUF_BYTES (512 * 1024)
#define BUFS 8
#define F_BYTES (64 * 1024)
#define MAX_WORKERS 256
#define MAX_NODES 64
#define PAGE 4096

enum { INSTEP, LEADER, STAGGERED, RANDOM, SLICES, PRODCONS, UNEQUAL, MIGRATE, FALSESHARE };
static const char *modes[] = {"instep", "leader", "staggered", "random", "slices",
                              "prodcons", "unequal", "migrate", "falseshare"};
/* Worker 0's progress through A in the current pass (leader mode), in
 * chunks of LEAD_CHUNK words. */
#define LEAD_CHUNK (64 * 1024 / 8)
static volatile size_t lead_done;

struct region {
    const char *name;
    volatile uint64_t *p;
    size_t bytes;
    signed char *node; /* each page's node, -1 unknown */
};

static int mode, workers, passes;
static int cpus[MAX_WORKERS], ncpus;
static struct region A, S, F, BUF[BUFS];
static pthread_barrier_t step;
static volatile int bad;

/* Accesses per (CPU node, memory node), per region; each worker adds its
 * own at its end. */
static uint64_t truth_a[MAX_NODES][MAX_NODES], truth_s[MAX_NODES][MAX_NODES],
    truth_f[MAX_NODES][MAX_NODES], truth_buf[MAX_NODES][MAX_NODES];
static uint64_t truth_private[MAX_WORKERS][MAX_NODES][MAX_NODES];
static struct region PRIV[MAX_WORKERS];
static pthread_mutex_t truth_lock = PTHREAD_MUTEX_INITIALIZER;
static long tids[MAX_WORKERS];
static uint64_t a_accesses[MAX_WORKERS];
static int final_cpu[MAX_WORKERS];

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) perror("sched_setaffinity");
}

static int node_of_cpu(int cpu) {
    char path[128];
    for (int n = 0; n < MAX_NODES; n++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/node%d", cpu, n);
        if (access(path, F_OK) == 0) return n;
    }
    return 0;
}

/* Where each page of r is now (after its first touches). */
static void locate(struct region *r) {
    size_t pages = r->bytes / PAGE;
    void **addrs = malloc(pages * sizeof *addrs);
    int *status = malloc(pages * sizeof *status);
    r->node = malloc(pages);
    for (size_t i = 0; i < pages; i++) addrs[i] = (char *)r->p + i * PAGE;
    /* The raw system call: no libnuma needed where the guest runs it. */
    if (syscall(SYS_move_pages, 0, pages, addrs, NULL, status, 0) != 0) {
        for (size_t i = 0; i < pages; i++) status[i] = 0; /* one node, no NUMA support */
    }
    for (size_t i = 0; i < pages; i++) r->node[i] = status[i] >= 0 ? status[i] : -1;
    free(addrs);
    free(status);
}

static volatile uint64_t *alloc_region(struct region *r, const char *name, size_t bytes) {
    r->name = name;
    r->bytes = bytes;
    r->p = aligned_alloc(PAGE, bytes);
    return r->p;
}

static void print_region(struct region *r) {
    printf("region %s %p %zu\n", r->name, (void *)r->p, r->bytes);
}

/* Reads words [from, to) of r, counting each access at its page's node. */
static uint64_t scan_pages(struct region *r, size_t from, size_t to, uint64_t *by_node) {
    uint64_t s = 0;
    size_t i = from;
    while (i < to) {
        size_t page = i * 8 / PAGE;
        size_t end = (page + 1) * PAGE / 8;
        if (end > to) end = to;
        for (size_t k = i; k < end; k++) s += r->p[k];
        int n = r->node[page];
        if (n >= 0) by_node[n] += end - i;
        i = end;
    }
    return s;
}

/* Writes word k = k + add over [0, words) of r, counting at the pages' nodes
 * (located after the first fill). */
static void fill_pages(struct region *r, uint64_t add, uint64_t *by_node) {
    size_t words = r->bytes / 8;
    for (size_t k = 0; k < words; k++) r->p[k] = k + add;
    if (r->node == NULL) locate(r);
    for (size_t page = 0; page < r->bytes / PAGE; page++)
        if (r->node[page] >= 0) by_node[(int)r->node[page]] += PAGE / 8;
}

static uint64_t sum_of(size_t from, size_t to) { /* sum of words k = k */
    return (uint64_t)(to - from) * (from + to - 1) / 2;
}

static uint64_t xorshift(uint64_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

static void add_truth(uint64_t (*t)[MAX_NODES], int cpu_node, uint64_t *by_node) {
    for (int n = 0; n < MAX_NODES; n++) t[cpu_node][n] += by_node[n];
}

static void *worker(void *arg) {
    int w = (int)(intptr_t)arg;
    int cpu = cpus[w % ncpus];
    pin(cpu);
    tids[w] = syscall(SYS_gettid);
    int node = node_of_cpu(cpu);
    size_t words = A_BYTES / 8;
    uint64_t a_nodes[MAX_NODES] = {0}, own[MAX_NODES] = {0}, s_nodes[MAX_NODES] = {0},
             buf_nodes[MAX_NODES] = {0}, f_nodes[MAX_NODES] = {0};
    uint64_t a_nodes_moved[MAX_NODES] = {0}, own_moved[MAX_NODES] = {0};
    int moved_node = node;

    /* Private array: first-touched here. */
    struct region *pr = &PRIV[w];
    size_t pw = PRIVATE_BYTES / 8;
    for (size_t k = 0; k < pw; k++) pr->p[k] = k;
    /* A slice of S: first-touched by its owner. */
    size_t slice = S_BYTES / 8 / workers;
    size_t s_from = slice * w, s_to = s_from + slice;
    if (mode == SLICES)
        for (size_t k = s_from; k < s_to; k++) S.p[k] = k;
    locate(pr);
    pthread_barrier_wait(&step);
    if (w == 0 && mode == SLICES) locate(&S);
    pthread_barrier_wait(&step); /* every page placed and located */

    uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(w + 1) * 0x100000001b3ull;
    for (int k = 0; k < passes; k++) {
        int reps = (mode == UNEQUAL && w == workers - 1) ? 4 : 1;
        uint64_t *an = a_nodes;
        if (mode == MIGRATE && w == 0 && k == passes / 2) {
            pin(cpus[(workers - 1) % ncpus]);
            moved_node = node_of_cpu(cpus[(workers - 1) % ncpus]);
        }
        if (mode == MIGRATE && w == 0 && k >= passes / 2) an = a_nodes_moved;
        switch (mode) {
        case LEADER:
            for (size_t c = 0; c < words; c += LEAD_CHUNK) {
                size_t end = c + LEAD_CHUNK > words ? words : c + LEAD_CHUNK;
                if (w != 0)
                    while (__atomic_load_n(&lead_done, __ATOMIC_ACQUIRE) < end) sched_yield();
                if (scan_pages(&A, c, end, an) != sum_of(c, end)) bad = 1;
                if (w == 0) __atomic_store_n(&lead_done, end, __ATOMIC_RELEASE);
            }
            break;
        case INSTEP:
        case UNEQUAL:
        case MIGRATE:
            for (int r = 0; r < reps; r++)
                if (scan_pages(&A, 0, words, an) != sum_of(0, words)) bad = 1;
            break;
        case STAGGERED:
        case FALSESHARE: {
            if (mode == FALSESHARE && (w == 0 || w == workers - 1)) {
                /* Two words of F's first line, written all the time. */
                volatile uint64_t *mine = &F.p[w == 0 ? 0 : 1];
                for (size_t i = 0; i < words / 8; i++) *mine += 1;
                f_nodes[F.node[0]] += words / 8 * 2; /* a load and a store each */
                break;
            }
            size_t from = (words / workers) * w & ~(size_t)511;
            if (scan_pages(&A, from, words, an) + scan_pages(&A, 0, from, an) != sum_of(0, words))
                bad = 1;
            break;
        }
        case RANDOM: {
            uint64_t s = 0;
            for (size_t i = 0; i < words; i++) {
                size_t at = xorshift(&seed) % words;
                s += A.p[at];
                int n = A.node[at * 8 / PAGE];
                if (n >= 0) an[n]++;
            }
            if (s == 1) bad = 1; /* keep the loads */
            break;
        }
        case SLICES:
            if (scan_pages(&S, s_from, s_to, s_nodes) != sum_of(s_from, s_to)) bad = 1;
            if (scan_pages(&S, s_from, s_to, s_nodes) != sum_of(s_from, s_to)) bad = 1;
            break;
        case PRODCONS: {
            int pairs = workers / 2, producer = w < pairs, pair = producer ? w : w - pairs;
            if (w >= pairs * 2) { /* an odd one out: idle, but at the barrier */
                pthread_barrier_wait(&step);
                break;
            }
            for (int b = pair; b < BUFS; b += pairs) {
                struct region *r = &BUF[b];
                if (producer) fill_pages(r, k, buf_nodes);
            }
            pthread_barrier_wait(&step);
            if (!producer)
                for (int b = pair; b < BUFS; b += pairs) {
                    struct region *r = &BUF[b];
                    size_t bw = r->bytes / 8;
                    uint64_t got = scan_pages(r, 0, bw, buf_nodes);
                    if (got != sum_of(0, bw) + (uint64_t)k * bw) bad = 1;
                }
            break;
        }
        }
        /* Own private array, every pass. */
        if (scan_pages(pr, 0, pw, an == a_nodes_moved ? own_moved : own) != sum_of(0, pw)) bad = 1;
        pthread_barrier_wait(&step);
        if (mode == LEADER && w == 0) __atomic_store_n(&lead_done, 0, __ATOMIC_RELEASE);
        pthread_barrier_wait(&step);
    }
    pthread_mutex_lock(&truth_lock);
    int start_node = node;
    add_truth(truth_a, start_node, a_nodes);
    add_truth(truth_a, moved_node, a_nodes_moved);
    add_truth(truth_s, node, s_nodes);
    add_truth(truth_buf, node, buf_nodes);
    add_truth(truth_f, node, f_nodes);
    for (int n = 0; n < MAX_NODES; n++) {
        truth_private[w][start_node][n] += own[n];
        truth_private[w][moved_node][n] += own_moved[n];
        a_accesses[w] += a_nodes[n] + a_nodes_moved[n];
    }
    final_cpu[w] = sched_getcpu();
    pthread_mutex_unlock(&truth_lock);
    return NULL;
}

static void print_truth(const char *name, uint64_t (*t)[MAX_NODES]) {
    for (int c = 0; c < MAX_NODES; c++)
        for (int m = 0; m < MAX_NODES; m++)
            if (t[c][m]) printf("truth %s %d %d %llu\n", name, c, m, (unsigned long long)t[c][m]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: truth MODE [THREADS] [PASSES]\n");
        return 2;
    }
    mode = -1;
    for (int m = 0; m < (int)(sizeof modes / sizeof *modes); m++)
        if (strcmp(argv[1], modes[m]) == 0) mode = m;
    if (mode < 0) {
        fprintf(stderr, "truth: unknown mode '%s'\n", argv[1]);
        return 2;
    }
    cpu_set_t allowed;
    sched_getaffinity(0, sizeof allowed, &allowed);
    for (int c = 0; c < CPU_SETSIZE && ncpus < MAX_WORKERS; c++)
        if (CPU_ISSET(c, &allowed)) cpus[ncpus++] = c;
    workers = argc > 2 ? atoi(argv[2]) : ncpus;
    passes = argc > 3 ? atoi(argv[3]) : 20;
    long a_kib = argc > 4 ? atol(argv[4]) : 16384;
    if (workers < 1 || workers > MAX_WORKERS || passes < 1 || a_kib < 64 || a_kib > (1L << 22)) {
        fprintf(stderr, "truth: THREADS 1-%d, PASSES >= 1, A_KIB 64-4194304\n", MAX_WORKERS);
        return 2;
    }
    A_BYTES = (size_t)a_kib * 1024;
    pin(cpus[0]);
    /* A: first-touched here, by the main thread on the first CPU. */
    alloc_region(&A, "A", A_BYTES);
    for (size_t k = 0; k < A_BYTES / 8; k++) A.p[k] = k;
    locate(&A);
    if (mode == SLICES) alloc_region(&S, "S", S_BYTES);
    if (mode == FALSESHARE) {
        alloc_region(&F, "F", F_BYTES);
        F.p[0] = F.p[1] = 0;
        locate(&F);
    }
    if (mode == PRODCONS)
        for (int b = 0; b < BUFS; b++) {
            static char names[BUFS][8];
            snprintf(names[b], sizeof names[b], "BUF%d", b);
            alloc_region(&BUF[b], names[b], BUF_BYTES);
        }
    for (int w = 0; w < workers; w++) {
        static char names[MAX_WORKERS][12];
        snprintf(names[w], sizeof names[w], "P%d", w);
        alloc_region(&PRIV[w], names[w], PRIVATE_BYTES);
    }
    pthread_barrier_init(&step, NULL, workers);
    pthread_t th[MAX_WORKERS];
    for (int w = 0; w < workers; w++) pthread_create(&th[w], NULL, worker, (void *)(intptr_t)w);
    for (int w = 0; w < workers; w++) pthread_join(th[w], NULL);

    print_region(&A);
    print_truth("A", truth_a);
    if (mode == SLICES) {
        print_region(&S);
        print_truth("S", truth_s);
    }
    if (mode == FALSESHARE) {
        print_region(&F);
        print_truth("F", truth_f);
    }
    if (mode == PRODCONS) {
        for (int b = 0; b < BUFS; b++) print_region(&BUF[b]);
        print_truth("BUF", truth_buf);
    }
    for (int w = 0; w < workers; w++) {
        print_region(&PRIV[w]);
        for (int c = 0; c < MAX_NODES; c++)
            for (int n = 0; n < MAX_NODES; n++)
                if (truth_private[w][c][n])
                    printf("truth %s %d %d %llu\n", PRIV[w].name, c, n,
                           (unsigned long long)truth_private[w][c][n]);
    }
    for (int w = 0; w < workers; w++)
        printf("thread %d %ld %d %d %llu\n", w + 1, tids[w], final_cpu[w],
               node_of_cpu(final_cpu[w]), (unsigned long long)a_accesses[w]);
    if (bad) {
        fprintf(stderr, "truth: a sum was wrong\n");
        return 1;
    }
    return 0;
}
