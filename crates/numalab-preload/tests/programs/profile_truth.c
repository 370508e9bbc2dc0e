/* A program whose NUMA truth is known by construction, for `numalab
 * profile` in the Quartet guest (4 nodes, 2 CPUs each):
 *
 * - A (24 MiB): the main thread, pinned to CPU 0, initialises it; then one
 *   reader thread per CPU reads all of it. Its pages are on node 0, and
 *   6 of the 8 readers are on other nodes: 75% of its accesses remote.
 * - B (16 MiB): one slice per thread, each first-touched and read by its
 *   owner only: every access local.
 * - C (8 MiB, mmap): bound with mbind to the last node with CPUs (or the
 *   node the second argument names), read only by the threads of node 0:
 *   every access remote.
 * - E (8 MiB): the main thread initialises it, then only the threads of
 *   the last CPU's node read it: private to that node, first-touched by
 *   another thread, every access remote.
 * - D (one cache line at the start of a 64 KiB block): two counters
 *   side by side, `first_node` written by the thread on CPU 0 and
 *   `second_node` by the thread on the first CPU of another node (the last
 *   CPU on a one-node machine), all the time: false sharing, for
 *   refinement to find. The rest of the block is never touched.
 * - static_table (4 MiB, .bss) and a 1 MiB buffer on its stack: written
 *   by the thread on the last CPU only, so their pages are on its node.
 *
 * Arguments: [PASSES over the arrays, default 30] [NODE for C].
 *
 * Prints each array's address and size ("A 0x... 25165824") so the test
 * can find its region, the thread whose stack holds the buffer ("stack
 * buffer: thread TID on CPU N"), and exits 0 when every sum is right. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MB (1024 * 1024)
#define A_BYTES (24 * MB)
#define B_BYTES (16 * MB)
#define C_BYTES (8 * MB)
#define E_BYTES (8 * MB)
#define STATIC_BYTES (4 * MB)
#define STACK_BYTES (1 * MB)
#define COUNTERS_BYTES (64 * 1024)

struct shared_counters {
    uint64_t first_node;  /* offset 0 */
    uint64_t second_node; /* offset 8 */
    uint64_t unused[6];
};
static struct shared_counters *d;
static int second_writer;
/* Where this thread counts its progress: its own stack, or a field of D. */
static __thread volatile uint64_t *progress;

static uint64_t static_table[STATIC_BYTES / 8] __attribute__((aligned(4096)));

static uint64_t *a, *b, *c, *e;
static int cpus, last_node, last_cpu_node;
static int passes = 30;

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

/* The node of a CPU, from sysfs (cpuN/nodeM). */
static int node_of(int cpu) {
    char path[128];
    for (int n = 0; n < 64; n++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/node%d", cpu, n);
        if (access(path, F_OK) == 0) return n;
    }
    return 0;
}

/* Reads every 8th word of [p, p + words): a sum the test can check. */
static uint64_t pass(const volatile uint64_t *p, size_t words) {
    uint64_t s = 0;
    for (size_t i = 0; i < words; i += 8) {
        s += p[i];
        if ((i & 511) == 0) (*progress)++;
    }
    return s;
}

/* The same sum, starting at word `from` and wrapping round. Each thread
 * reads A from its own offset: a fault sample goes to the first access
 * after a page is armed, so threads sweeping A in step from the same start
 * would give A's samples to whichever thread leads, not to every reader in
 * proportion (under TCG the leader varies run to run). */
static uint64_t pass_from(const volatile uint64_t *p, size_t words, size_t from) {
    return pass(p + from, words - from) + pass(p, from);
}

static uint64_t expected(uint64_t first, size_t words) {
    uint64_t s = 0;
    for (size_t i = 0; i < words; i += 8) s += first + i;
    return s;
}

static volatile int go;
static pthread_barrier_t step;
static int bad;

/* The last CPU's thread writes static_table and a buffer on its own
 * stack; both sums are checked. */
static void last_cpu_data(int cpu) {
    volatile uint64_t buffer[STACK_BYTES / 8];
    for (size_t i = 0; i < STACK_BYTES / 8; i++) buffer[i] = i;
    for (size_t i = 0; i < STATIC_BYTES / 8; i++) static_table[i] = i;
    if (pass(buffer, STACK_BYTES / 8) != expected(0, STACK_BYTES / 8) ||
        pass(static_table, STATIC_BYTES / 8) != expected(0, STATIC_BYTES / 8))
        __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
    printf("stack buffer: thread %ld on CPU %d\n", (long)syscall(SYS_gettid), cpu);
    fflush(stdout);
}

static void *worker(void *arg) {
    int cpu = (int)(intptr_t)arg;
    pin(cpu);
    volatile uint64_t own = 0;
    progress = cpu == 0 ? &d->first_node : cpu == second_writer ? &d->second_node : &own;
    size_t slice = B_BYTES / 8 / cpus;
    uint64_t *mine = b + cpu * slice;
    for (size_t i = 0; i < slice; i++) mine[i] = cpu * slice + i; /* first touch */
    if (cpu == cpus - 1) last_cpu_data(cpu);
    while (!go) sched_yield();
    int on_zero = node_of(cpu) == 0, on_last = node_of(cpu) == last_cpu_node;
    uint64_t wa = expected(0, A_BYTES / 8), wb = expected(cpu * slice, slice),
             wc = expected(0, C_BYTES / 8), we = expected(0, E_BYTES / 8);
    /* The same passes for every thread, in lockstep (a barrier per pass)
     * and with the same work per pass (the threads that read neither C nor
     * E read their slice as many more bytes): every thread reads A equally often
     * at every moment, so the shares are the construction's (75% remote
     * for A), whatever the sampling rate does over time. */
    size_t extra = C_BYTES / 8 / slice;
    size_t a_from = (A_BYTES / 8 / cpus) * cpu & ~(size_t)7;
    for (int k = 0; k < passes; k++) {
        if (pass_from(a, A_BYTES / 8, a_from) != wa) __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        if (pass(mine, slice) != wb) __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        if (on_zero)
            if (pass(c, C_BYTES / 8) != wc) __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        if (on_last)
            if (pass(e, E_BYTES / 8) != we) __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        if (!on_zero && !on_last) {
            for (size_t r = 0; r < extra; r++)
                if (pass(mine, slice) != wb) __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        }
        pthread_barrier_wait(&step);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) passes = atoi(argv[1]);
    cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus > 64) cpus = 64;
    pin(0);
    for (int cpu = 0; cpu < cpus; cpu++)
        if (node_of(cpu) > last_node) last_node = node_of(cpu);
    last_cpu_node = node_of(cpus - 1);
    /* A second argument names C's node instead (a CPU-less node). */
    if (argc > 2) last_node = atoi(argv[2]);
    a = malloc(A_BYTES);
    b = malloc(B_BYTES);
    c = mmap(NULL, C_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    e = malloc(E_BYTES);
    d = aligned_alloc(4096, COUNTERS_BYTES);
    d->first_node = d->second_node = 0;
    second_writer = cpus - 1;
    for (int cpu = 1; cpu < cpus; cpu++)
        if (node_of(cpu) != node_of(0)) {
            second_writer = cpu;
            break;
        }
    volatile uint64_t main_progress = 0;
    progress = &main_progress;
    unsigned long mask = 1UL << last_node;
    /* MPOL_BIND = 2: every page of C on the last node of a CPU. */
    long bound = syscall(SYS_mbind, c, C_BYTES, 2, &mask, 64, 0);
    for (size_t i = 0; i < A_BYTES / 8; i++) a[i] = i;
    for (size_t i = 0; i < C_BYTES / 8; i++) c[i] = i;
    for (size_t i = 0; i < E_BYTES / 8; i++) e[i] = i;
    printf("A %p %d\nB %p %d\nC %p %d bound to node %d: %s\nE %p %d\nS %p %d\n", (void *)a,
           A_BYTES, (void *)b, B_BYTES, (void *)c, C_BYTES, last_node, bound == 0 ? "yes" : "no",
           (void *)e, E_BYTES, (void *)static_table, STATIC_BYTES);
    printf("D %p 64 written from CPUs 0 and %d\n", (void *)d, second_writer);
    fflush(stdout);
    pthread_barrier_init(&step, NULL, cpus);
    pthread_t t[64];
    for (int i = 0; i < cpus; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    go = 1;
    for (int i = 0; i < cpus; i++) pthread_join(t[i], NULL);
    printf("threads %d, wrong sums %d\n", cpus, bad);
    free(a);
    free(b);
    free(e);
    /* D is not freed: glibc's free writes its list pointers into the
     * chunk's first words, from the main thread on node 0, and the word
     * counter rightly saw that as node 0 writing `second_node` (CI,
     * 9162e36). The counters' truth is two writers, one a word. */
    munmap(c, C_BYTES);
    return bad != 0;
}
