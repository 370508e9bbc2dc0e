/* What armed hardware watchpoints cost two threads that meet often: two
 * threads pinned to CPUs 0 and 1 each scan 24 MiB (one load a cache line),
 * meeting at a barrier after every pass, as profile_truth.c's do; rounds of
 * PASSES passes alternate (0 1 1 0 0 1 1 0 ...) between four breakpoint
 * perf events open and enabled on each thread, on words it never touches
 * (what a watched window of word counting holds), and none. Prints the
 * armed rounds' wall time and each thread's CPU time over the unarmed
 * rounds', and the difference in user and system time (getrusage).
 * NBP 0 is the control (the same rounds, nothing armed); MODE 1 drops the
 * barrier between passes (one a round).
 *
 *   gcc -O2 -pthread -o /tmp/armed-lockstep bench/armed-lockstep.c
 *   /tmp/armed-lockstep [ROUNDS 200] [NBP 4] [MODE 0]
 *
 * docs/profile.md ("Overhead measured", 2026-12-07, a fourth session) has
 * its runs on the 2-CPU VM. A report, not a test. */
#define _GNU_SOURCE
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
static double ru(int user){struct rusage u; getrusage(RUSAGE_THREAD,&u); struct timeval t= user?u.ru_utime:u.ru_stime; return t.tv_sec+t.tv_usec*1e-6;}
static uint64_t words[64];
static double now(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int open_bp(void *addr) {
    struct perf_event_attr a; memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_BREAKPOINT; a.size = sizeof a; a.bp_type = HW_BREAKPOINT_RW;
    a.bp_addr = (uint64_t)addr; a.bp_len = 8; a.exclude_kernel = 1; a.exclude_hv = 1;
    return syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}
static pthread_barrier_t bar;
static int rounds = 200, passes = 20, nbp = 4, mode = 0; /* PASSES: 20 */
static double wall[2], cpu[2][2], usr[2][2], sy[2][2];
static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    cpu_set_t s; CPU_ZERO(&s); CPU_SET(id, &s); sched_setaffinity(0, sizeof s, &s);
    size_t n = 24 << 20; uint64_t *a = malloc(n); for (size_t i = 0; i < n / 8; i++) a[i] = i;
    volatile uint64_t sum = 0;
    for (int r = 0; r < rounds; r++) {
        int armed = (r ^ (r >> 1)) & 1;
        int fd[4] = {-1, -1, -1, -1};
        if (armed) for (int k = 0; k < nbp; k++) fd[k] = open_bp(&words[(id * 4 + k) * 2]);
        pthread_barrier_wait(&bar);
        double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID), u0 = ru(1), s0 = ru(0);
        for (int p = 0; p < passes; p++) {
            for (size_t i = 0; i < n / 8; i += 8) sum += a[i];
            if (mode == 0) pthread_barrier_wait(&bar);
        }
        pthread_barrier_wait(&bar);
        if (id == 0) wall[armed] += now(CLOCK_MONOTONIC) - w0;
        cpu[id][armed] += now(CLOCK_THREAD_CPUTIME_ID) - c0; usr[id][armed] += ru(1) - u0; sy[id][armed] += ru(0) - s0;
        for (int k = 0; k < 4; k++) if (fd[k] >= 0) close(fd[k]);
        if (armed && nbp && fd[0] < 0) { perror("perf_event_open"); exit(1); }
    }
    return NULL;
}
int main(int argc, char **argv) {
    if (argc > 1) rounds = atoi(argv[1]);
    if (argc > 2) nbp = atoi(argv[2]);
    if (argc > 3) mode = atoi(argv[3]); // 0: barrier per pass, 1: none
    pthread_barrier_init(&bar, NULL, 2);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    printf("wall armed/unarmed %.4f  cpu0 %.4f  cpu1 %.4f  (unarmed wall %.3f s)\n", wall[1] / wall[0],
           cpu[0][1] / cpu[0][0], cpu[1][1] / cpu[1][0], wall[0]);
    printf("  user armed-unarmed %+.1f ms %+.1f ms; sys armed-unarmed %+.1f ms %+.1f ms (sys unarmed %.1f ms)\n", 1e3*(usr[0][1]-usr[0][0]), 1e3*(usr[1][1]-usr[1][0]), 1e3*(sy[0][1]-sy[0][0]), 1e3*(sy[1][1]-sy[1][0]), 1e3*sy[0][0]);
    return 0;
}
