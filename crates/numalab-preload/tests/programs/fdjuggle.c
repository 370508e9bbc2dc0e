/* Programs that juggle file descriptors, run under the preload library
 * (`numalab profile`, `run --plan`): the library's record file must never
 * become one of theirs.
 *
 * - `fdjuggle close DIR`: closes every descriptor from 3 up (what daemons
 *   and closefrom() do), then opens DIR/a.txt and DIR/b.txt and writes 310
 *   bytes to each, in pieces, between passes over a 32 MiB array (so that
 *   the library has records to write meanwhile).
 * - `fdjuggle dup2 DIR`: opens DIR/c.txt, dup2s it onto 3..63, writes
 *   through each of them between passes over the array.
 *
 * - `fdjuggle reopen DIR`: closes every descriptor from 3 up, then opens
 *   DIR/in.txt (64 bytes) 800 times, on 3..802, where the library's own
 *   descriptors were and would be (its events sit from 700 up), and reads
 *   it byte by byte through every descriptor, between passes over the
 *   array: each read must give the next byte of the file. Exits 3 when a
 *   descriptor gives another byte (something else read the file), 4 when
 *   it fails (something closed it).
 *
 * Prints "sum S" (the array's passes). The files must hold exactly the
 * bytes the program wrote. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BYTES (32 << 20)

static unsigned char *array;

static unsigned long pass(int k) {
    unsigned long s = 0;
    for (size_t i = 0; i < BYTES; i += 64) s += array[i] + (unsigned)k;
    return s;
}

static int open_out(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) perror(path);
    return fd;
}

/* 310 bytes: 10 pieces of 31, each a pass over the array apart. */
static unsigned long write_pieces(int fd, char tag, unsigned long *sum) {
    char piece[31];
    for (int k = 0; k < 10; k++) {
        memset(piece, tag + k, sizeof piece);
        piece[30] = '\n';
        if (write(fd, piece, sizeof piece) != (ssize_t)sizeof piece) return 1;
        *sum += pass(k);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: fdjuggle close|dup2|reopen DIR\n");
        return 2;
    }
    array = malloc(BYTES);
    memset(array, 1, BYTES);
    unsigned long sum = 0;
    if (strcmp(argv[1], "close") == 0) {
        for (int fd = 3; fd < 1024; fd++) close(fd);
        int a = open_out(argv[2], "a.txt");
        int b = open_out(argv[2], "b.txt");
        if (a < 0 || b < 0) return 1;
        if (write_pieces(a, 'a', &sum) || write_pieces(b, 'A', &sum)) return 1;
        close(a);
        close(b);
    } else if (strcmp(argv[1], "dup2") == 0) {
        int c = open_out(argv[2], "c.txt");
        if (c < 0) return 1;
        for (int fd = 3; fd < 64; fd++)
            if (fd != c && dup2(c, fd) != fd) return 1;
        for (int fd = 3; fd < 64; fd++) {
            char line[8];
            int n = snprintf(line, sizeof line, "%d\n", fd);
            if (write(fd, line, n) != n) return 1;
            sum += pass(fd);
        }
    } else if (strcmp(argv[1], "reopen") == 0) {
        enum { COPIES = 800, ROUNDS = 64 };
        static int fds[COPIES];
        char path[4096], want[ROUNDS];
        snprintf(path, sizeof path, "%s/in.txt", argv[2]);
        /* Word counting's windows turn meanwhile: its events are open. */
        for (int k = 0; k < 20; k++) sum += pass(k);
        for (int fd = 3; fd < 1024; fd++) close(fd);
        for (int i = 0; i < COPIES; i++) {
            fds[i] = open(path, O_RDONLY);
            if (fds[i] < 0) {
                perror(path);
                return 1;
            }
        }
        FILE *f = fopen(path, "r");
        if (!f || fread(want, 1, ROUNDS, f) != ROUNDS) return 1;
        fclose(f);
        for (int k = 0; k < ROUNDS; k++) {
            for (int j = 0; j < 4; j++) sum += pass(k + j);
            for (int i = 0; i < COPIES; i++) {
                char c;
                ssize_t n = read(fds[i], &c, 1);
                if (n != 1) {
                    fprintf(stderr, "fdjuggle: descriptor %d: read gave %zd at byte %d\n", fds[i], n, k);
                    return 4;
                }
                if (c != want[k]) {
                    fprintf(stderr, "fdjuggle: descriptor %d: byte %d is '%c', the file has '%c'\n", fds[i], k, c, want[k]);
                    return 3;
                }
            }
        }
    } else {
        fprintf(stderr, "fdjuggle: unknown mode '%s'\n", argv[1]);
        return 2;
    }
    printf("sum %lu\n", sum);
    return 0;
}
