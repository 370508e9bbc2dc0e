/* touch_pages THREADS PAGES CPU_MS: THREADS threads (the main one among
 * them when THREADS is 1) each map PAGES fresh anonymous pages and write one
 * byte to each (PAGES page faults each), then spin until their own CPU time
 * reaches CPU_MS milliseconds. Deterministic counts for the counters tests
 * (crates/numalab-cli/tests/host/counters.rs). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static long pages, cpu_ms;

static void *work(void *arg) {
    (void)arg;
    long page = sysconf(_SC_PAGESIZE);
    volatile char *p = mmap(NULL, pages * page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    /* No huge pages: one fault per page. */
    madvise((void *)p, pages * page, MADV_NOHUGEPAGE);
    for (long i = 0; i < pages; i++)
        p[i * page] = 1;
    struct timespec t;
    do {
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while (t.tv_sec * 1000L + t.tv_nsec / 1000000L < cpu_ms);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: touch_pages THREADS PAGES CPU_MS\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    pages = atol(argv[2]);
    cpu_ms = atol(argv[3]);
    if (threads == 1) {
        work(NULL);
        return 0;
    }
    pthread_t t[64];
    for (int i = 0; i < threads && i < 64; i++)
        pthread_create(&t[i], NULL, work, NULL);
    for (int i = 0; i < threads && i < 64; i++)
        pthread_join(t[i], NULL);
    return 0;
}
