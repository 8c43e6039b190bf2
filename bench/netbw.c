/*
 * netbw: loopback TCP bandwidth, the network ceiling beside the brokers'
 * figures in bench/run.
 *
 * Usage: netbw [MIB] [CHUNK_KIB] [RECV_CPU SEND_CPU]
 * A receiver listens on 127.0.0.1 (ephemeral port), a forked sender connects
 * and writes MIB mebibytes in CHUNK_KIB writes; the receiver reads them and
 * prints one line:
 *   RESULT mode=loopback bytes=B secs=S mb_s=M
 * (1 MB = 1e6 bytes). With the CPU arguments each side pins itself, as the
 * bench pins the broker and the client. Exit status 2 on any socket error.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        perror("netbw: sched_setaffinity (continuing unpinned)");
}

static int sender(const struct sockaddr_in *addr, long long total, size_t chunk)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char *buf = calloc(1, chunk);
    if (fd < 0 || buf == NULL || connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0) {
        perror("netbw: connect");
        return 2;
    }
    long long left = total;
    while (left > 0) {
        size_t n = left < (long long)chunk ? (size_t)left : chunk;
        ssize_t w = write(fd, buf, n);
        if (w <= 0) {
            perror("netbw: write");
            return 2;
        }
        left -= w;
    }
    close(fd);
    free(buf);
    return 0;
}

static long long receive_all(int fd, size_t chunk)
{
    char *buf = malloc(chunk);
    long long got = 0;
    ssize_t r;
    if (buf == NULL)
        return -1;
    while ((r = read(fd, buf, chunk)) > 0)
        got += r;
    free(buf);
    return r < 0 ? -1 : got;
}

int main(int argc, char **argv)
{
    long long total = (argc > 1 ? atoll(argv[1]) : 1024) << 20;
    size_t chunk = (size_t)(argc > 2 ? atol(argv[2]) : 64) << 10;
    int recv_cpu = argc > 4 ? atoi(argv[3]) : -1;
    int send_cpu = argc > 4 ? atoi(argv[4]) : -1;
    struct sockaddr_in addr = {.sin_family = AF_INET};
    socklen_t alen = sizeof(addr);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (total <= 0 || chunk == 0 || lfd < 0 || bind(lfd, (struct sockaddr *)&addr, alen) != 0 ||
        listen(lfd, 1) != 0 || getsockname(lfd, (struct sockaddr *)&addr, &alen) != 0) {
        perror("netbw: listen");
        return 2;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("netbw: fork");
        return 2;
    }
    if (child == 0) {
        close(lfd);
        pin(send_cpu);
        _exit(sender(&addr, total, chunk));
    }
    pin(recv_cpu);
    int fd = accept(lfd, NULL, NULL);
    double t0 = now_s();
    long long got = fd >= 0 ? receive_all(fd, chunk) : -1;
    double secs = now_s() - t0;
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        got != total) {
        fprintf(stderr, "netbw: transfer failed (%lld of %lld bytes)\n", got, total);
        return 2;
    }
    printf("RESULT mode=loopback bytes=%lld secs=%.4f mb_s=%.1f\n", got, secs,
           (double)got / secs / 1e6);
    return 0;
}
