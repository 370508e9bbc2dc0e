/*
 * mpi_ranks: one line per MPI rank, for numalab's cluster tests:
 *
 *   rank R of N local L host H cpus LIST
 *
 * R and N from MPI_Comm_rank/MPI_Comm_size of MPI_COMM_WORLD; L the rank's
 * index among the ranks on its host (MPI_Comm_split_type SHARED, which Open
 * MPI derives from the launcher: SLURM_LOCALID under srun, the node-local
 * rank under mpirun); H from gethostname; LIST the CPUs of
 * sched_getaffinity as ranges ("0-1", "0,2-3").
 *
 * Lines are printed in rank order (a barrier between turns) so the output
 * of a launcher that keeps per-rank order is easy to read; each is flushed.
 *
 * Build: mpicc -O2 -Wall -o mpi_ranks tests/programs/mpi_ranks.c
 * Run:   srun --mpi=pmix -N 2 -n 4 ./mpi_ranks
 *        (as root under mpirun: --allow-run-as-root, or
 *         OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* "0-1,4,6-7" from the CPUs set in *set. */
static void cpu_ranges(const cpu_set_t *set, char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, set))
            continue;
        int last = cpu;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        int n = (last == cpu)
            ? snprintf(out + used, len - used, "%s%d", used ? "," : "", cpu)
            : snprintf(out + used, len - used, "%s%d-%d", used ? "," : "", cpu, last);
        if (n < 0 || (size_t)n >= len - used)
            break;
        used += (size_t)n;
        cpu = last;
    }
}

int main(int argc, char **argv)
{
    int rank, size, local;
    char host[256], cpus[4096];
    cpu_set_t set;
    MPI_Comm node;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);

    if (gethostname(host, sizeof host) != 0)
        strcpy(host, "?");
    host[sizeof host - 1] = '\0';
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cpu_ranges(&set, cpus, sizeof cpus);
    else
        strcpy(cpus, "?");

    for (int turn = 0; turn < size; turn++) {
        if (turn == rank) {
            printf("rank %d of %d local %d host %s cpus %s\n", rank, size, local, host, cpus);
            fflush(stdout);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }

    MPI_Comm_free(&node);
    MPI_Finalize();
    return 0;
}
