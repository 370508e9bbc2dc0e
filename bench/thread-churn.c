/* thread-churn N: starts N threads one after another, each touching one
 * fresh page, and joins each before the next: the worst case for
 * `numalab run --counters --per-thread`, which stops every new thread
 * twice and opens its events (bench/counters-overhead.sh). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *work(void *arg) {
    volatile char *p = malloc(4096);
    if (p)
        p[0] = (char)(long)arg;
    free((void *)p);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: thread-churn N\n");
        return 2;
    }
    long n = atol(argv[1]);
    for (long i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, work, (void *)i) != 0) {
            perror("pthread_create");
            return 1;
        }
        pthread_join(t, NULL);
    }
    printf("%ld threads\n", n);
    return 0;
}
