/* numalab_check: libnumalab exercised from C, as a program outside the
 * workspace uses it (built with cc $(pkg-config --cflags --libs numalab)).
 * The host tests (tests/c_api.rs) and the Quartet guest run it.
 *
 *   numalab_check policies PAGES POLICY...   allocate PAGES pages with each
 *       policy and verify: one line "policy=P status=S verified=V total=T
 *       untouched=U nodes=N:C,..." each. "k/POLICY" allocates with
 *       NUMALAB_ALLOC_WEIGHTED_KERNEL; "team:SET" is a first touch by the
 *       set's CPUs; "range:POLICY" places a malloc'ed range instead;
 *       "from:SET/POLICY" binds the calling thread to SET first (for
 *       first-touch, local, remote and preferred, relative to it) and back
 *       to all its CPUs after.
 *   numalab_check threads SET POLICY N       N threads, each bound as member
 *       i of a team of N by thread policy POLICY over SET, each checked:
 *       "thread=i cpu=C running=R allowed=A verified=V".
 *   numalab_check bind SET_A SET_B           numalab_bind_thread_id puts a
 *       second thread on SET_A, numalab_bind_process then both on SET_B;
 *       each checked once it has run there: "step=S thread=T running=R
 *       allowed=A verified=V".
 *   numalab_check errors                     bad input from C: each case
 *       prints "ok CASE" or "FAIL CASE ..."; exit status = failures.
 *   numalab_check sets TOPOLOGY              named and nested sets.
 *   numalab_check results FILE               a results.json's tables.
 */
#include <numalab.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

static const char *name(numalab_status s) { return numalab_status_name((int)s); }

static void die(const char *what, numalab_status s) {
    fprintf(stderr, "numalab_check: %s: %s: %s\n", what, name(s), numalab_last_error());
    exit(1);
}

static void print_nodes(const numalab_page_counts *c) {
    int first = 1;
    printf("nodes=");
    for (unsigned n = 0; n < NUMALAB_MAX_NODES; n++) {
        if (c->by_node[n] == 0) continue;
        printf("%s%u:%llu", first ? "" : ",", n, (unsigned long long)c->by_node[n]);
        first = 0;
    }
    if (first) printf("none");
}

static int policies(int argc, char **argv) {
    numalab_machine *m;
    numalab_status s = numalab_machine_load(NULL, &m);
    if (s != NUMALAB_OK) die("machine", s);
    long pages = atol(argv[0]);
    size_t page = 4096;
    numalab_set *all;
    s = numalab_set_parse(m, "all", &all);
    if (s != NUMALAB_OK) die("set all", s);
    for (int i = 1; i < argc; i++) {
        const char *shown = argv[i];
        const char *text = shown;
        unsigned flags = 0;
        int moved = 0;
        if (strncmp(text, "from:", 5) == 0) {
            const char *slash = strchr(text, '/');
            if (!slash) die("from:SET/POLICY without '/'", NUMALAB_E_INVALID);
            char expr[256];
            snprintf(expr, sizeof expr, "%.*s", (int)(slash - text - 5), text + 5);
            numalab_set *from;
            s = numalab_set_parse(m, expr, &from);
            if (s != NUMALAB_OK) die("from set", s);
            s = numalab_bind_thread(from);
            if (s != NUMALAB_OK) die("bind to the from set", s);
            numalab_set_free(from);
            moved = 1;
            text = slash + 1;
        }
        numalab_policy *p = NULL;
        numalab_buffer_check c;
        void *buf = NULL;
        char *range = NULL;
        if (strncmp(text, "k/", 2) == 0) {
            flags |= NUMALAB_ALLOC_WEIGHTED_KERNEL;
            s = numalab_policy_parse(m, text + 2, &p);
        } else if (strncmp(text, "team:", 5) == 0) {
            numalab_set *set;
            s = numalab_set_parse(m, text + 5, &set);
            if (s == NUMALAB_OK) {
                s = numalab_policy_over_set(set, NUMALAB_POLICY_FIRST_TOUCH, 0, &p);
                numalab_set_free(set);
            }
        } else if (strncmp(text, "range:", 6) == 0) {
            s = numalab_policy_parse(m, text + 6, &p);
        } else {
            s = numalab_policy_parse(m, text, &p);
        }
        if (s == NUMALAB_OK && strncmp(text, "range:", 6) == 0) {
            /* Memory the program has: a malloc'ed block, touched first. */
            range = malloc((size_t)pages * page);
            if (!range) die("malloc", NUMALAB_E_OS);
            memset(range, 1, (size_t)pages * page);
            s = numalab_place_range(p, range, (size_t)pages * page, NUMALAB_PLACE_STRICT);
            if (s == NUMALAB_OK) s = numalab_verify_range(p, range, (size_t)pages * page, &c);
        } else if (s == NUMALAB_OK) {
            s = numalab_alloc(p, (size_t)pages * page, flags, &buf);
            if (s == NUMALAB_OK) s = numalab_verify(buf, &c);
        }
        if (s != NUMALAB_OK) {
            printf("policy=%s status=%s error=%s\n", shown, name(s), numalab_last_error());
        } else {
            printf("policy=%s status=%s verified=%d total=%llu untouched=%llu ", shown, name(s),
                   c.verified, (unsigned long long)c.pages.total,
                   (unsigned long long)c.pages.untouched);
            print_nodes(&c.pages);
            printf(" message=%s\n", c.message);
        }
        if (buf) numalab_free(buf);
        free(range);
        numalab_policy_free(p);
        if (moved && (s = numalab_bind_thread(all)) != NUMALAB_OK) die("bind back to all", s);
    }
    numalab_set_free(all);
    numalab_machine_free(m);
    return 0;
}

struct member {
    numalab_set *set;
    const char *policy;
    size_t team, index;
    unsigned cpu;
    numalab_thread_check check;
    numalab_status status;
    char error[512];
};

static void *run_member(void *arg) {
    struct member *t = arg;
    t->status = numalab_bind_team_member(t->set, t->policy, t->team, t->index, &t->cpu);
    if (t->status == NUMALAB_OK) {
        /* Check against the one CPU this member was given. */
        numalab_set *one = NULL;
        numalab_machine *m;
        t->status = numalab_machine_load(NULL, &m);
        if (t->status == NUMALAB_OK) t->status = numalab_set_from_cpus(m, &t->cpu, 1, &one);
        /* Some work, so that the thread has run where it was put. */
        volatile double x = 0;
        for (int i = 0; i < 1000000; i++) x += i;
        if (t->status == NUMALAB_OK) t->status = numalab_check_thread(0, one, &t->check);
        numalab_set_free(one);
        numalab_machine_free(m);
    }
    if (t->status != NUMALAB_OK) snprintf(t->error, sizeof t->error, "%s", numalab_last_error());
    return NULL;
}

static int threads(const char *expr, const char *policy, int n) {
    numalab_machine *m;
    numalab_set *set;
    numalab_status s = numalab_machine_load(NULL, &m);
    if (s != NUMALAB_OK) die("machine", s);
    s = numalab_set_parse(m, expr, &set);
    if (s != NUMALAB_OK) die("set", s);
    struct member *ts = calloc((size_t)n, sizeof *ts);
    pthread_t *ids = calloc((size_t)n, sizeof *ids);
    for (int i = 0; i < n; i++) {
        ts[i] = (struct member){.set = set, .policy = policy, .team = (size_t)n, .index = (size_t)i};
        pthread_create(&ids[i], NULL, run_member, &ts[i]);
    }
    for (int i = 0; i < n; i++) pthread_join(ids[i], NULL);
    for (int i = 0; i < n; i++) {
        struct member *t = &ts[i];
        if (t->status != NUMALAB_OK) {
            printf("thread=%d status=%s error=%s\n", i, name(t->status), t->error);
            continue;
        }
        printf("thread=%d cpu=%u running=%d allowed=", i, t->cpu, t->check.running_cpu);
        int first = 1;
        for (unsigned c = 0; c < NUMALAB_MAX_CPUS; c++)
            if (numalab_mask_isset(t->check.allowed, c)) {
                printf("%s%u", first ? "" : ",", c);
                first = 0;
            }
        printf(" verified=%d\n", t->check.verified);
    }
    free(ts);
    free(ids);
    numalab_set_free(set);
    numalab_machine_free(m);
    return 0;
}

/* The allowed CPUs of a check, as "0,2,5". */
static void print_allowed(const numalab_thread_check *c) {
    int first = 1;
    for (unsigned cpu = 0; cpu < NUMALAB_MAX_CPUS; cpu++)
        if (numalab_mask_isset(c->allowed, cpu)) {
            printf("%s%u", first ? "" : ",", cpu);
            first = 0;
        }
}

static void spin(void) {
    volatile double x = 0;
    for (int i = 0; i < 2000000; i++) x += i;
}

/* Two threads taking turns: the second waits for "go", runs a little and
 * checks itself against the set it was put on, then says "done". */
struct turns {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int go, done;
    int tid;
    const numalab_set *asked;
    numalab_thread_check check;
    numalab_status status;
};

static void wait_for(struct turns *t, int *flag, int value) {
    pthread_mutex_lock(&t->lock);
    while (*flag < value) pthread_cond_wait(&t->cond, &t->lock);
    pthread_mutex_unlock(&t->lock);
}

static void set_flag(struct turns *t, int *flag, int value) {
    pthread_mutex_lock(&t->lock);
    *flag = value;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

static void *second_thread(void *arg) {
    struct turns *t = arg;
    int tid = 0;
    numalab_thread_id(&tid);
    pthread_mutex_lock(&t->lock);
    t->tid = tid;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
    for (int round = 1; round <= 2; round++) {
        wait_for(t, &t->go, round);
        spin();
        t->status = numalab_check_thread(0, t->asked, &t->check);
        set_flag(t, &t->done, round);
    }
    return NULL;
}

static void print_check(const char *step, const char *who, numalab_status s,
                        const numalab_thread_check *c) {
    if (s != NUMALAB_OK) {
        printf("step=%s thread=%s status=%s error=%s\n", step, who, name(s), numalab_last_error());
        failures++;
        return;
    }
    printf("step=%s thread=%s running=%d allowed=", step, who, c->running_cpu);
    print_allowed(c);
    printf(" verified=%d\n", c->verified);
}

static int bindings(const char *expr_a, const char *expr_b) {
    numalab_machine *m;
    numalab_set *a, *b;
    numalab_status s = numalab_machine_load(NULL, &m);
    if (s != NUMALAB_OK) die("machine", s);
    if ((s = numalab_set_parse(m, expr_a, &a)) != NUMALAB_OK) die("set a", s);
    if ((s = numalab_set_parse(m, expr_b, &b)) != NUMALAB_OK) die("set b", s);
    struct turns t = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    pthread_t id;
    pthread_create(&id, NULL, second_thread, &t);
    pthread_mutex_lock(&t.lock);
    while (t.tid == 0) pthread_cond_wait(&t.cond, &t.lock);
    pthread_mutex_unlock(&t.lock);

    /* One thread, by its id, from another thread. */
    if ((s = numalab_bind_thread_id(t.tid, a)) != NUMALAB_OK) die("numalab_bind_thread_id", s);
    t.asked = a;
    set_flag(&t, &t.go, 1);
    wait_for(&t, &t.done, 1);
    print_check("thread_id", "second", t.status, &t.check);

    /* Every thread of the process. */
    if ((s = numalab_bind_process(b)) != NUMALAB_OK) die("numalab_bind_process", s);
    spin();
    numalab_thread_check mine;
    numalab_status ms = numalab_check_thread(0, b, &mine);
    print_check("process", "main", ms, &mine);
    t.asked = b;
    set_flag(&t, &t.go, 2);
    wait_for(&t, &t.done, 2);
    print_check("process", "second", t.status, &t.check);
    pthread_join(id, NULL);
    numalab_set_free(a);
    numalab_set_free(b);
    numalab_machine_free(m);
    return failures;
}

#define EXPECT(case_name, call, want)                                                       \
    do {                                                                                   \
        numalab_status got_ = (call);                                                      \
        if (got_ == (want) && strlen(numalab_last_error()) > 0) {                          \
            printf("ok %s: %s: %s\n", case_name, name(got_), numalab_last_error());        \
        } else {                                                                           \
            printf("FAIL %s: got %s (%s), want %s\n", case_name, name(got_),               \
                   numalab_last_error(), name(want));                                      \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static int errors(void) {
    numalab_machine *m = NULL;
    numalab_set *all = NULL, *out = NULL;
    numalab_policy *p = NULL;
    void *buf = NULL;
    size_t n = 0;
    numalab_page_counts counts;
    numalab_buffer_check check;
    numalab_status s = numalab_machine_load(NULL, &m);
    if (s != NUMALAB_OK) die("machine", s);
    if (numalab_set_parse(m, "all", &all) != NUMALAB_OK) die("set", NUMALAB_E_INVALID);
    if (numalab_policy_parse(m, "first-touch", &p) != NUMALAB_OK) die("policy", NUMALAB_E_INVALID);

    EXPECT("null out", numalab_machine_load(NULL, NULL), NUMALAB_E_NULL);
    EXPECT("null machine", numalab_set_parse(NULL, "all", &out), NUMALAB_E_NULL);
    EXPECT("null expression", numalab_set_parse(m, NULL, &out), NUMALAB_E_NULL);
    EXPECT("null set", numalab_set_cpus(NULL, NULL, 0, &n), NUMALAB_E_NULL);
    EXPECT("null count", numalab_set_cpus(all, NULL, 0, NULL), NUMALAB_E_NULL);
    EXPECT("null ids with room", numalab_set_cpus(all, NULL, 4, &n), NUMALAB_E_NULL);
    EXPECT("null policy", numalab_alloc(NULL, 4096, 0, &buf), NUMALAB_E_NULL);
    EXPECT("null buffer out", numalab_alloc(p, 4096, 0, NULL), NUMALAB_E_NULL);
    EXPECT("null range", numalab_range_pages(NULL, 4096, &counts), NUMALAB_E_NULL);
    EXPECT("null check", numalab_verify(NULL, &check), NUMALAB_E_NULL);
    EXPECT("null counts", numalab_page_counts_format(NULL, NULL, 0, &n), NUMALAB_E_NULL);
    EXPECT("null thread set", numalab_bind_thread(NULL), NUMALAB_E_NULL);

    EXPECT("bad expression", numalab_set_parse(m, "node:99", &out), NUMALAB_E_INVALID);
    if (out != NULL) { printf("FAIL bad expression left *out set\n"); failures++; }
    numalab_policy *bad = NULL;
    EXPECT("bad policy", numalab_policy_parse(m, "interleave:", &bad), NUMALAB_E_INVALID);
    EXPECT("policy with a node that does not exist", numalab_policy_parse(m, "bind:99", &bad), NUMALAB_E_INVALID);
    EXPECT("weight out of range", numalab_policy_weighted(m, (unsigned[]){0}, (unsigned[]){0}, 1, 0, &bad), NUMALAB_E_INVALID);
    EXPECT("bad thread policy", numalab_bind_team_member(all, "spread", 1, 0, NULL), NUMALAB_E_INVALID);
    EXPECT("team too large", numalab_bind_team_member(all, "scatter", 100000, 0, NULL), NUMALAB_E_INVALID);
    EXPECT("unknown flags", numalab_alloc(p, 4096, 1u << 20, &buf), NUMALAB_E_INVALID);
    EXPECT("zero size", numalab_alloc(p, 0, 0, &buf), NUMALAB_E_INVALID);

    /* Sizes that overflow: size_t arithmetic a C program gets wrong. */
    EXPECT("size beyond the address space", numalab_alloc(p, SIZE_MAX, 0, &buf), NUMALAB_E_OVERFLOW);
    EXPECT("count times size overflows", numalab_alloc_array(p, SIZE_MAX / 4, 8, 0, &buf), NUMALAB_E_OVERFLOW);
    EXPECT("range wraps around", numalab_range_pages((void *)4096, SIZE_MAX, &counts), NUMALAB_E_OVERFLOW);
    EXPECT("place wraps around", numalab_place_range(p, (void *)4096, SIZE_MAX - 100, 0), NUMALAB_E_OVERFLOW);
    EXPECT("capacity beyond any array", numalab_set_cpus(all, (unsigned *)&n, SIZE_MAX, &n), NUMALAB_E_OVERFLOW);
    EXPECT("more than the machine", numalab_alloc(p, (size_t)1 << 52, 0, &buf), NUMALAB_E_CAPACITY);

    /* Freed, foreign and mistaken handles. */
    numalab_set *gone = NULL;
    if (numalab_set_copy(all, &gone) != NUMALAB_OK) die("copy", NUMALAB_E_INVALID);
    if (numalab_set_free(gone) != NUMALAB_OK) die("free", NUMALAB_E_INVALID);
    EXPECT("freed set", numalab_set_cpus(gone, NULL, 0, &n), NUMALAB_E_HANDLE);
    EXPECT("freed set freed again", numalab_set_free(gone), NUMALAB_E_HANDLE);
    EXPECT("freed set bound to", numalab_bind_thread(gone), NUMALAB_E_HANDLE);
    EXPECT("machine given as a set", numalab_set_cpus((numalab_set *)m, NULL, 0, &n), NUMALAB_E_HANDLE);
    EXPECT("pointer never handed out", numalab_set_cpus((numalab_set *)&n, NULL, 0, &n), NUMALAB_E_HANDLE);
    if (numalab_alloc(p, 4096, 0, &buf) != NUMALAB_OK) die("alloc", NUMALAB_E_INVALID);
    EXPECT("inside a buffer, not its start", numalab_free((char *)buf + 64), NUMALAB_E_HANDLE);
    if (numalab_free(buf) != NUMALAB_OK) die("free", NUMALAB_E_INVALID);
    EXPECT("buffer freed twice", numalab_free(buf), NUMALAB_E_HANDLE);
    EXPECT("verify a freed buffer", numalab_verify(buf, &check), NUMALAB_E_HANDLE);
    char local[64];
    EXPECT("free of a stack address", numalab_free(local), NUMALAB_E_HANDLE);

    /* Text outputs too small are truncated, never overrun. */
    char small[8];
    memset(small, 'x', sizeof small);
    EXPECT("buffer too small", numalab_set_format(all, small, 4, &n), NUMALAB_E_TRUNCATED);
    if (small[3] != '\0' || small[4] != 'x') { printf("FAIL truncation wrote past the buffer\n"); failures++; }

    numalab_set_free(all);
    numalab_policy_free(p);
    numalab_machine_free(m);
    printf("failures=%d\n", failures);
    return failures;
}

static int sets(const char *topology) {
    numalab_machine *m;
    numalab_set *job, *io, *compute, *left, *found;
    numalab_status s = numalab_machine_load(topology, &m);
    if (s != NUMALAB_OK) die("machine", s);
    if (numalab_set_parse(m, "none", &job) || numalab_set_parse(m, "node:0", &io) ||
        numalab_set_parse(m, "node:1", &compute) || numalab_set_parse(m, "node:3", &left))
        die("parse", NUMALAB_E_INVALID);
    if (numalab_set_add_named(compute, "left", left) || numalab_set_add_named(job, "io", io) ||
        numalab_set_add_named(job, "compute", compute))
        die("add", NUMALAB_E_INVALID);
    char text[128];
    numalab_set_format(job, text, sizeof text, NULL);
    printf("job %s\n", text);
    s = numalab_set_named(job, "compute/left", &found);
    if (s != NUMALAB_OK) die("named", s);
    numalab_set_format(found, text, sizeof text, NULL);
    printf("compute/left %s\n", text);
    size_t count;
    numalab_set_named_count(job, &count);
    for (size_t i = 0; i < count; i++) {
        char nm[32];
        numalab_set *sub;
        numalab_set_named_at(job, i, nm, sizeof nm, NULL, &sub);
        numalab_set_format(sub, text, sizeof text, NULL);
        printf("subset %zu %s %s\n", i, nm, text);
        numalab_set_free(sub);
    }
    s = numalab_set_named(job, "compute/right", &found);
    printf("missing %s %s\n", name(s), numalab_last_error());
    unsigned d, h;
    numalab_machine_distance(m, 0, 3, &d);
    numalab_machine_hops(m, 0, 3, &h);
    printf("distance 0-3 %u hops %u\n", d, h);
    numalab_machine_free(m);
    return 0;
}

static int results(const char *path) {
    numalab_results *r;
    numalab_status s = numalab_results_load(path, &r);
    if (s != NUMALAB_OK) die("results", s);
    char kind[64];
    numalab_results_kind(r, kind, sizeof kind, NULL);
    size_t tables;
    numalab_results_table_count(r, &tables);
    printf("kind %s tables %zu\n", kind, tables);
    for (size_t t = 0; t < tables; t++) {
        char tname[64], cell[256];
        size_t rows, cols;
        numalab_results_table(r, t, tname, sizeof tname, NULL, &rows, &cols);
        numalab_results_cell(r, t, -1, 0, cell, sizeof cell, NULL);
        printf("table %s rows %zu columns %zu first-column %s", tname, rows, cols, cell);
        if (rows > 0) {
            numalab_results_cell(r, t, 0, 0, cell, sizeof cell, NULL);
            printf(" first-cell %s", cell);
        }
        printf("\n");
    }
    double nodes;
    size_t len;
    if (numalab_results_length(r, "/machine/nodes", &len) == NUMALAB_OK)
        printf("machine nodes %zu\n", len);
    if (numalab_results_number(r, "/machine/nodes/1/os_index", &nodes) == NUMALAB_OK)
        printf("second node %g\n", nodes);
    /* A table by name, and a value as text: its size first, then the text. */
    size_t index, needed = 0;
    if (numalab_results_table_find(r, "distances", &index) == NUMALAB_OK)
        printf("find distances %zu\n", index);
    s = numalab_results_table_find(r, "no-such-table", &index);
    printf("find no-such-table %s %s\n", name(s), numalab_last_error());
    if (numalab_results_text(r, "/schema_version", NULL, 0, &needed) == NUMALAB_OK) {
        char *text = malloc(needed);
        if (numalab_results_text(r, "/schema_version", text, needed, NULL) == NUMALAB_OK)
            printf("schema_version %s (%zu bytes)\n", text, needed);
        free(text);
    }
    if (numalab_results_text(r, "/machine/nodes/0", NULL, 0, &needed) == NUMALAB_OK)
        printf("node 0 as JSON needs %zu bytes\n", needed);
    numalab_results_free(r);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "policies") == 0) return policies(argc - 2, argv + 2);
    if (argc == 5 && strcmp(argv[1], "threads") == 0) return threads(argv[2], argv[3], atoi(argv[4]));
    if (argc == 4 && strcmp(argv[1], "bind") == 0) return bindings(argv[2], argv[3]);
    if (argc == 2 && strcmp(argv[1], "errors") == 0) return errors();
    if (argc == 3 && strcmp(argv[1], "sets") == 0) return sets(argv[2]);
    if (argc == 3 && strcmp(argv[1], "results") == 0) return results(argv[2]);
    fprintf(stderr, "usage: numalab_check policies PAGES POLICY... | threads SET POLICY N | bind SET_A SET_B | errors | sets TOPOLOGY | results FILE\n");
    return 2;
}
