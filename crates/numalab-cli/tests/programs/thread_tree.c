/* thread_tree PAGES: a tree of tasks with known page faults, for
 * `numalab run --counters --per-thread` (tests/counters.rs).
 * - the main thread faults PAGES / 2 pages;
 * - threads "touch-1", "touch-2", "touch-3" fault K * PAGES pages each;
 *   touch-2 starts its own thread "touch-2b" (PAGES pages);
 * - then a child process named "child" faults PAGES pages and exits 0
 *   after a thread of its own, "child-t", faulted PAGES / 4.
 * Huge pages are disabled on every mapping: one fault per page. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static long pages;

static void touch(long n) {
    long page = sysconf(_SC_PAGESIZE);
    volatile char *p = mmap(NULL, n * page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise((void *)p, n * page, MADV_NOHUGEPAGE);
    for (long i = 0; i < n; i++)
        p[i * page] = 1;
}

static void *inner(void *arg) {
    prctl(PR_SET_NAME, (char *)arg);
    touch(strcmp((char *)arg, "child-t") == 0 ? pages / 4 : pages);
    return NULL;
}

static void *work(void *arg) {
    long k = (long)arg;
    char name[16];
    snprintf(name, sizeof name, "touch-%ld", k);
    prctl(PR_SET_NAME, name);
    touch(k * pages);
    if (k == 2) {
        pthread_t t;
        pthread_create(&t, NULL, inner, "touch-2b");
        pthread_join(t, NULL);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: thread_tree PAGES\n");
        return 2;
    }
    pages = atol(argv[1]);
    touch(pages / 2);
    pthread_t t[3];
    for (long k = 1; k <= 3; k++)
        pthread_create(&t[k - 1], NULL, work, (void *)k);
    for (int k = 0; k < 3; k++)
        pthread_join(t[k], NULL);
    pid_t c = fork();
    if (c == 0) {
        prctl(PR_SET_NAME, "child");
        pthread_t ct;
        pthread_create(&ct, NULL, inner, "child-t");
        pthread_join(ct, NULL);
        touch(pages);
        _exit(0);
    }
    int status;
    waitpid(c, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
