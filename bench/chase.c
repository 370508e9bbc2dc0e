/*
 * chase.c: an independent, standard dependent-load pointer chase (the method of lmbench's
 * lat_mem_rd and multichase's "simple" chase), used by bench/compare.sh to cross-check
 * `numalab bench latency --pattern random`.
 *
 * One pointer per 64-byte line of an anonymous mmap'd buffer; the lines are linked in one
 * random cycle (Sattolo's algorithm) so that every load depends on the previous one and the
 * hardware prefetchers cannot guess the next address. Transparent huge pages are refused
 * (MADV_NOHUGEPAGE), so every load past the TLB's reach pays a page walk, as with
 * numalab's default (no --huge). The thread is pinned before the buffer is touched, so the
 * pages are local to that CPU (first touch).
 *
 * Usage: chase [-s SIZE] [-c CPU] [-r RUNS] [-t SECONDS | -n LOADS] [-S SEED]
 *   SIZE     buffer bytes, suffix K, M, G (binary: K = 1024); default 1G
 *   CPU      CPU to pin to; default: do not pin
 *   RUNS     timed runs; the best (lowest) and the median are reported; default 31
 *   SECONDS  length of one timed run, at least; default 0.02 (short runs, as numalab's samples)
 *   LOADS    loads per timed run instead (rounded up to a multiple of 16)
 * Prints one line: size=BYTES lines=N loads=N runs=N ns_best=X ns_median=Y
 *
 * Build: gcc -O2 -o chase chase.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define LINE 64

static void die(const char *what)
{
    fprintf(stderr, "chase: %s: %s\n", what, strerror(errno));
    exit(1);
}

static uint64_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    uint64_t mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1ull << 10; break;
    case 'm': case 'M': mult = 1ull << 20; break;
    case 'g': case 'G': mult = 1ull << 30; break;
    case '\0': case 'b': case 'B': break;
    default:
        fprintf(stderr, "chase: bad size '%s' (e.g. 4096, 256K, 64M, 1G)\n", s);
        exit(2);
    }
    if (!(v > 0)) {
        fprintf(stderr, "chase: bad size '%s'\n", s);
        exit(2);
    }
    return (uint64_t)(v * (double)mult);
}

/* splitmix64: a small, well-mixed generator; seeds the shuffle reproducibly. */
static uint64_t rng_state;
static uint64_t next_rand(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Follows the chain for `count` loads (count a multiple of 16); returns the last pointer so
 * the compiler cannot drop the loads. */
static __attribute__((noinline)) void *walk(void *p, uint64_t count)
{
#define STEP p = *(void **)p;
#define STEP4 STEP STEP STEP STEP
    for (uint64_t i = 0; i < count; i += 16) {
        STEP4 STEP4 STEP4 STEP4
    }
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    uint64_t size = 1ull << 30;
    int cpu = -1, runs = 31, opt;
    double seconds = 0.02;
    uint64_t fixed_loads = 0;
    uint64_t seed = 0x12345678abcdefull;

    while ((opt = getopt(argc, argv, "s:c:r:t:n:S:h")) != -1) {
        switch (opt) {
        case 's': size = parse_size(optarg); break;
        case 'c': cpu = atoi(optarg); break;
        case 'r': runs = atoi(optarg); break;
        case 't': seconds = atof(optarg); break;
        case 'n': fixed_loads = strtoull(optarg, NULL, 0); break;
        case 'S': seed = strtoull(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: %s [-s SIZE] [-c CPU] [-r RUNS] [-t SECONDS | -n LOADS] [-S SEED]\n", argv[0]);
            return opt == 'h' ? 0 : 2;
        }
    }
    if (runs < 1 || runs > 1000 || !(seconds > 0)) {
        fprintf(stderr, "chase: runs must be 1..1000 and seconds > 0\n");
        return 2;
    }
    uint64_t lines = size / LINE;
    if (lines < 2) {
        fprintf(stderr, "chase: size must be at least %d bytes\n", 2 * LINE);
        return 2;
    }
    size = lines * LINE;

    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0)
            die("sched_setaffinity");
    }

    char *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        die("mmap");
    if (madvise(buf, size, MADV_NOHUGEPAGE) != 0)
        die("madvise(MADV_NOHUGEPAGE)");
    memset(buf, 0, size); /* first touch from the pinned CPU */

    /* Sattolo's algorithm: a uniformly random cyclic permutation (one cycle over all lines). */
    uint32_t *perm = malloc(lines * sizeof *perm);
    if (!perm)
        die("malloc");
    for (uint64_t i = 0; i < lines; i++)
        perm[i] = (uint32_t)i;
    rng_state = seed;
    for (uint64_t i = lines - 1; i > 0; i--) {
        uint64_t j = next_rand() % i; /* j < i: Sattolo, not Fisher-Yates */
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (uint64_t i = 0; i < lines; i++)
        *(void **)(buf + i * LINE) = buf + (uint64_t)perm[i] * LINE;
    free(perm);

    /* Warm-up: one full lap up to 2^21 lines (128 MiB, more than any cache here) so caches
     * and TLB are in steady state, and calibration of the number of loads that lasts
     * `seconds`. */
    void *p = buf;
    uint64_t warm = lines < (1u << 21) ? lines : (1u << 21);
    warm = (warm + 15) / 16 * 16;
    if (warm < (1u << 16))
        warm = 1u << 16;
    double t0 = now();
    p = walk(p, warm);
    double per = (now() - t0) / (double)warm;
    uint64_t loads = (uint64_t)(seconds / (per > 0 ? per : 1e-9));
    loads = (loads + 15) / 16 * 16;
    if (loads < (1u << 16))
        loads = 1u << 16;
    if (fixed_loads > 0)
        loads = (fixed_loads + 15) / 16 * 16;

    double *ns = malloc((size_t)runs * sizeof *ns);
    if (!ns)
        die("malloc");
    for (int r = 0; r < runs; r++) {
        double a = now();
        p = walk(p, loads);
        double b = now();
        ns[r] = (b - a) * 1e9 / (double)loads;
    }
    qsort(ns, (size_t)runs, sizeof *ns, cmp_double);
    double median = runs % 2 ? ns[runs / 2] : (ns[runs / 2 - 1] + ns[runs / 2]) / 2;

    /* p is used so the chain cannot be optimized away. */
    printf("size=%llu lines=%llu loads=%llu runs=%d ns_best=%.3f ns_median=%.3f%s\n",
           (unsigned long long)size, (unsigned long long)lines, (unsigned long long)loads, runs,
           ns[0], median, p == NULL ? " (null)" : "");
    munmap(buf, size);
    free(ns);
    return 0;
}
