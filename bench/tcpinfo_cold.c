/* What getsockopt(TCP_INFO) costs a sampler tick, socket by socket (bench/cold_reads.py builds and runs it).
 *
 * tcpinfo_cold FLOWS TICKS SPACED: FLOWS idle loopback connections; TICKS ticks, each a getsockopt of every
 * client end, SPACED 1: 10 ms apart (the sampler's ticks: the caches cold), 0: back to back (warm). Prints
 * one JSON object: the median over the ticks (the first 10 left out) of us (CLOCK_MONOTONIC: a median, so
 * that the ticks a neighbour preempted drop out) of the tick's first read, of the mean of the others, and of
 * the mean of all. The first read finds the kernel's code cold; the others, only their own socket's lines. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 10

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: tcpinfo_cold FLOWS TICKS SPACED\n");
        return 2;
    }
    int flows = atoi(argv[1]), ticks = atoi(argv[2]), spaced = atoi(argv[3]);
    if (flows < 2 || flows > 4096 || ticks <= WARMUP) {
        fprintf(stderr, "tcpinfo_cold: FLOWS 2..4096, TICKS > %d\n", WARMUP);
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    int lsock = socket(AF_INET, SOCK_STREAM, 0);
    if (lsock < 0 || bind(lsock, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lsock, flows) < 0
        || getsockname(lsock, (struct sockaddr *)&addr, &alen) < 0) {
        perror("tcpinfo_cold: listener");
        return 1;
    }
    int *client = calloc((size_t)flows, sizeof(int)), *server = calloc((size_t)flows, sizeof(int));
    if (client == NULL || server == NULL) return 1;
    for (int i = 0; i < flows; i++) {
        client[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (client[i] < 0 || connect(client[i], (struct sockaddr *)&addr, sizeof addr) < 0
            || (server[i] = accept(lsock, NULL, NULL)) < 0) {
            perror("tcpinfo_cold: connection");
            return 1;
        }
    }
    int n = ticks - WARMUP;
    double *first = calloc((size_t)n, sizeof(double)), *rest = calloc((size_t)n, sizeof(double));
    double *all = calloc((size_t)n, sizeof(double));
    if (first == NULL || rest == NULL || all == NULL) return 1;
    struct tcp_info info;
    for (int t = 0; t < ticks; t++) {
        if (spaced) usleep(10000);
        double t0 = now_ns(), start = t0, one = 0;
        for (int i = 0; i < flows; i++) {
            socklen_t len = sizeof info;
            if (getsockopt(client[i], IPPROTO_TCP, TCP_INFO, &info, &len) < 0) {
                perror("tcpinfo_cold: getsockopt");
                return 1;
            }
            double t1 = now_ns();
            if (i == 0) one = t1 - t0;
            t0 = t1;
        }
        if (t < WARMUP) continue;
        first[t - WARMUP] = one / 1e3;
        rest[t - WARMUP] = (t0 - start - one) / (flows - 1) / 1e3;
        all[t - WARMUP] = (t0 - start) / flows / 1e3;
    }
    printf("{\"first\": %.3f, \"others\": %.3f, \"all\": %.3f}\n", median(first, n), median(rest, n),
           median(all, n));
    return 0;
}
