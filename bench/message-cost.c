/*
 * The CPU cost of one message round trip between two processes of this
 * host, over TCP on loopback and over a Unix socket (docs/benchmarks.md,
 * "TPC-C against MariaDB", what was tried): two processes pass 100 bytes
 * back and forth 200,000 times with blocking reads, as a SQL node and a
 * data node do when neither has other work, and the user and system CPU
 * of both is divided by the round trips. `futex` passes the turn through
 * shared memory instead and wakes the other side with a futex, as a
 * shared-memory transport does when its reader sleeps: no network stack,
 * only the sleep and the wake-up. Under `taskset -c 0` both processes
 * share one CPU, and a wake-up needs no interrupt to the other CPU.
 *
 * usage: gcc -O2 -o /tmp/message-cost bench/message-cost.c
 *        /tmp/message-cost tcp|unix|futex
 *        taskset -c 0 /tmp/message-cost tcp|unix|futex
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { ROUND_TRIPS = 200000, MESSAGE = 100 };

static void fail(const char *what) {
    perror(what);
    exit(1);
}

/* Reads exactly MESSAGE bytes; 0 when the peer closed. */
static int read_message(int fd, char *buffer) {
    int got = 0;
    while (got < MESSAGE) {
        ssize_t n = read(fd, buffer + got, MESSAGE - got);
        if (n <= 0) return 0;
        got += (int)n;
    }
    return 1;
}

/* A connected pair: sockets[0] for the parent, sockets[1] for the child. */
static void connected_pair(int unix_socket, int sockets[2]) {
    if (unix_socket) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sockets) != 0) fail("socketpair");
        return;
    }
    int one = 1;
    int listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {0};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(listener, 1) != 0 ||
        getsockname(listener, (struct sockaddr *)&address, &length) != 0)
        fail("listen");
    sockets[0] = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(sockets[0], (struct sockaddr *)&address, sizeof address) != 0) fail("connect");
    sockets[1] = accept(listener, NULL, NULL);
    if (sockets[1] < 0) fail("accept");
    close(listener);
    /* As the cluster's connections: small messages go out at once. */
    setsockopt(sockets[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(sockets[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static double seconds(struct timeval t) { return t.tv_sec + t.tv_usec / 1e6; }

/* Waits until the shared turn is `mine`, asleep on the futex meanwhile. */
static void wait_turn(atomic_int *turn, int mine) {
    while (atomic_load(turn) != mine) syscall(SYS_futex, turn, FUTEX_WAIT, !mine, NULL, NULL, 0);
}

/* Hands the turn to the other side and wakes it. */
static void give_turn(atomic_int *turn, int mine) {
    atomic_store(turn, !mine);
    syscall(SYS_futex, turn, FUTEX_WAKE, 1, NULL, NULL, 0);
}

int main(int argc, char **argv) {
    if (argc != 2 || (strcmp(argv[1], "tcp") != 0 && strcmp(argv[1], "unix") != 0 &&
                      strcmp(argv[1], "futex") != 0)) {
        fprintf(stderr, "usage: %s tcp|unix|futex\n", argv[0]);
        return 2;
    }
    int futex = strcmp(argv[1], "futex") == 0;
    int unix_socket = strcmp(argv[1], "unix") == 0;
    int sockets[2];
    char buffer[MESSAGE];
    memset(buffer, 1, sizeof buffer);
    /* The futex mode's shared turn: 0 the parent's, 1 the child's. */
    atomic_int *turn = mmap(NULL, sizeof *turn, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (turn == MAP_FAILED) fail("mmap");
    atomic_store(turn, 0);
    if (!futex) connected_pair(unix_socket, sockets);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t child = fork();
    if (child < 0) fail("fork");
    if (futex) {
        int mine = child == 0;
        for (int i = 0; i < ROUND_TRIPS; i++) {
            wait_turn(turn, mine);
            give_turn(turn, mine);
        }
        if (child == 0) return 0;
    } else if (child == 0) {
        /* The echoing side, until the parent closes its end. */
        close(sockets[0]);
        while (read_message(sockets[1], buffer))
            if (write(sockets[1], buffer, MESSAGE) != MESSAGE) fail("write");
        return 0;
    }
    if (!futex) {
        close(sockets[1]);
        for (int i = 0; i < ROUND_TRIPS; i++) {
            if (write(sockets[0], buffer, MESSAGE) != MESSAGE) fail("write");
            if (!read_message(sockets[0], buffer)) fail("read");
        }
        close(sockets[0]);
    }
    waitpid(child, NULL, 0);
    clock_gettime(CLOCK_MONOTONIC, &end);
    struct rusage parent, children;
    getrusage(RUSAGE_SELF, &parent);
    getrusage(RUSAGE_CHILDREN, &children);
    double cpu = seconds(parent.ru_utime) + seconds(parent.ru_stime) +
                 seconds(children.ru_utime) + seconds(children.ru_stime);
    double wall = (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
    printf("%s: %.1f us wall and %.1f us CPU per round trip\n", argv[1],
           wall * 1e6 / ROUND_TRIPS, cpu * 1e6 / ROUND_TRIPS);
    return 0;
}
