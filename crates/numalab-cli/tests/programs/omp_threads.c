/* An OpenMP program (GCC's libgomp, from Debian): a parallel sum, and each
 * OpenMP thread's CPU set as the thread itself saw it, printed by the master
 * after the region (threads printing at once interleave their lines).
 * libgomp creates a team's threads in the order of their thread numbers, so
 * the k-th thread the process creates is OpenMP thread k + 1. */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#define MAX_THREADS 64

int main(void) {
    static char sets[MAX_THREADS][256];
    int n = 0;
    long sum = 0;
#pragma omp parallel reduction(+ : sum)
    {
        int t = omp_get_thread_num();
        cpu_set_t s;
        CPU_ZERO(&s);
        if (t < MAX_THREADS && sched_getaffinity(0, sizeof s, &s) == 0) {
            char *p = sets[t];
            size_t used = 0;
            for (int c = 0; c < CPU_SETSIZE && used + 8 < sizeof sets[t]; c++)
                if (CPU_ISSET(c, &s)) used += snprintf(p + used, sizeof sets[t] - used, "%s%d", used ? "," : "", c);
        }
#pragma omp single
        n = omp_get_num_threads();
        for (long i = t; i < 1000000; i += omp_get_num_threads()) sum += i;
    }
    for (int t = 0; t < n && t < MAX_THREADS; t++) printf("omp thread %d cpus %s\n", t, sets[t]);
    printf("threads %d sum %ld\n", n, sum);
    return sum == 499999500000L ? 0 : 1;
}
