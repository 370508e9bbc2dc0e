/* The triad of the 2007 placement framework, a[i] = b[i] + s * c[i], with
 * each array on its own node (bind:0, bind:1, bind:2 where the machine has
 * three memory nodes; fewer nodes are reused in turn), the thread on the
 * first CPU of the first node, and each placement verified from the
 * kernel before the triad is timed.
 *
 *   cc -O2 triad.c $(pkg-config --cflags --libs numalab) -o triad
 *   ./triad [ELEMENTS]        (default 4194304: 32 MiB per array)
 */
#include <numalab.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void check(numalab_status s, const char *what) {
    if (s != NUMALAB_OK) {
        fprintf(stderr, "triad: %s: %s\n", what, numalab_last_error());
        exit(1);
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 22;
    numalab_machine *m;
    check(numalab_machine_load(NULL, &m), "machine");

    /* The memory nodes this process may use, in order. */
    numalab_set *all;
    unsigned nodes[NUMALAB_MAX_NODES];
    size_t count;
    check(numalab_set_global(m, &all), "set");
    check(numalab_set_nodes(all, nodes, NUMALAB_MAX_NODES, &count), "nodes");
    printf("machine: %zu memory node%s\n", count, count == 1 ? "" : "s");

    /* The thread on the first CPU of the first node, checked. */
    char expr[64];
    snprintf(expr, sizeof expr, "node:%u", nodes[0]);
    numalab_set *home;
    unsigned cpu;
    check(numalab_set_parse(m, expr, &home), "home set");
    check(numalab_bind_team_member(home, "compact", 1, 0, &cpu), "bind");

    const char *names[3] = {"a", "b", "c"};
    double *arrays[3];
    for (int i = 0; i < 3; i++) {
        char policy[32];
        snprintf(policy, sizeof policy, "bind:%u", nodes[(size_t)i % count]);
        void *p;
        check(numalab_alloc_str(m, n * sizeof(double), policy, 0, &p), policy);
        arrays[i] = p;
        numalab_buffer_check v;
        char pages[512];
        check(numalab_verify(p, &v), "verify");
        numalab_page_counts_format(&v.pages, pages, sizeof pages, NULL);
        printf("%s: %-8s %s  %s%s%s\n", names[i], policy, v.verified ? "verified" : "NOT VERIFIED",
               pages, v.verified ? "" : ": ", v.verified ? "" : v.message);
    }

    numalab_set *one;
    numalab_thread_check t;
    check(numalab_set_from_cpus(m, &cpu, 1, &one), "cpu set");
    check(numalab_check_thread(0, one, &t), "thread check");
    unsigned node;
    numalab_machine_node_of_cpu(m, cpu, &node);
    printf("thread: CPU %u (node %u) %s\n", cpu, node, t.verified ? "verified" : t.message);

    double *a = arrays[0], *b = arrays[1], *c = arrays[2];
    const double s = 3.0;
    for (size_t i = 0; i < n; i++) {
        b[i] = 1.0;
        c[i] = 2.0;
    }
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        double t1 = now();
        if (t1 - t0 < best) best = t1 - t0;
    }
    int ok = a[0] == 7.0 && a[n - 1] == 7.0;
    printf("triad: %zu elements, best of 5 %.3f ms, %.2f GB/s (program bytes), result %s\n", n,
           best * 1e3, 3.0 * (double)n * sizeof(double) / best / 1e9, ok ? "correct" : "WRONG");

    for (int i = 0; i < 3; i++) check(numalab_free(arrays[i]), "free");
    numalab_set_free(one);
    numalab_set_free(home);
    numalab_set_free(all);
    numalab_machine_free(m);
    return ok ? 0 : 1;
}
