/* A team of threads, each bound by a thread policy (scatter: one thread
 * per node in turn; compact: fill a node first), each checking where it
 * runs and giving itself an array by first touch, checked to be on its
 * node.
 *
 *   cc -O2 -pthread team.c $(pkg-config --cflags --libs numalab) -o team
 *   ./team [SET [POLICY [THREADS]]]   (default: all scatter, one per CPU)
 */
#include <numalab.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct member {
    numalab_machine *m;
    numalab_set *set;
    const char *policy;
    size_t team, index;
    char line[1536];
    int ok;
};

static void *run(void *arg) {
    struct member *t = arg;
    unsigned cpu, node;
    numalab_set *one = NULL;
    numalab_thread_check check;
    numalab_buffer_check mine;
    void *p = NULL;
    char pages[256];
    if (numalab_bind_team_member(t->set, t->policy, t->team, t->index, &cpu) ||
        numalab_set_from_cpus(t->m, &cpu, 1, &one) || numalab_check_thread(0, one, &check) ||
        numalab_machine_node_of_cpu(t->m, cpu, &node) ||
        numalab_alloc_str(t->m, 1 << 20, "first-touch", 0, &p) || numalab_verify(p, &mine)) {
        snprintf(t->line, sizeof t->line, "thread %zu: %s", t->index, numalab_last_error());
    } else {
        numalab_page_counts_format(&mine.pages, pages, sizeof pages, NULL);
        int on_node = mine.pages.by_node[node] == mine.pages.total;
        t->ok = check.verified && mine.verified && on_node;
        snprintf(t->line, sizeof t->line, "thread %zu: CPU %u (node %u), running on CPU %d: %s; its 1 MiB: %s, %s",
                 t->index, cpu, node, check.running_cpu, check.verified ? "verified" : check.message,
                 pages, t->ok ? "verified" : "NOT on its node");
    }
    numalab_free(p);
    numalab_set_free(one);
    return NULL;
}

int main(int argc, char **argv) {
    const char *expr = argc > 1 ? argv[1] : "all";
    const char *policy = argc > 2 ? argv[2] : "scatter";
    numalab_machine *m;
    numalab_set *set;
    if (numalab_machine_load(NULL, &m) || numalab_set_parse(m, expr, &set)) {
        fprintf(stderr, "team: %s\n", numalab_last_error());
        return 2;
    }
    size_t cpus;
    numalab_set_cpus(set, NULL, 0, &cpus);
    size_t n = argc > 3 ? strtoull(argv[3], NULL, 10) : cpus;
    struct member *ts = calloc(n, sizeof *ts);
    pthread_t *ids = calloc(n, sizeof *ids);
    printf("team of %zu threads, %s over %s\n", n, policy, expr);
    for (size_t i = 0; i < n; i++) {
        ts[i] = (struct member){.m = m, .set = set, .policy = policy, .team = n, .index = i};
        pthread_create(&ids[i], NULL, run, &ts[i]);
    }
    int failed = 0;
    for (size_t i = 0; i < n; i++) {
        pthread_join(ids[i], NULL);
        printf("%s\n", ts[i].line);
        failed += !ts[i].ok;
    }
    free(ts);
    free(ids);
    numalab_set_free(set);
    numalab_machine_free(m);
    return failed ? 1 : 0;
}
