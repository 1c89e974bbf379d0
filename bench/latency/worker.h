/* The worker side of run.py's protocol, shared by c_loop.c and hiredis_loop.c: the client under
 * test only supplies get_once(). After the caller printed its ready line, serve_rounds() reads
 * stdin lines "run N WARMUP", does WARMUP untimed GETs and N timed ones, and prints
 * {"total_ns":T,"lat_ns":[...]}; any other line (or EOF) ends it. Returns 0, or 1 when out of
 * memory. */
#ifndef BENCH_LATENCY_WORKER_H
#define BENCH_LATENCY_WORKER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* The key run.py sets to a 16-byte value first. */
#define KEY "key:__rand_int__"

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int serve_rounds(void (*get_once)(void)) {
    char line[128];
    uint64_t *lat = NULL;
    size_t cap = 0;
    printf("{\"ready\":true}\n");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        unsigned long n = 0, warmup = 0;
        if (sscanf(line, "run %lu %lu", &n, &warmup) != 2) break;
        if (n > cap) {
            free(lat);
            lat = malloc(n * sizeof *lat);
            if (!lat) return 1;
            cap = n;
        }
        for (unsigned long i = 0; i < warmup; i++) get_once();
        uint64_t t0 = now_ns();
        for (unsigned long i = 0; i < n; i++) {
            uint64_t s = now_ns();
            get_once();
            lat[i] = now_ns() - s;
        }
        uint64_t total = now_ns() - t0;
        printf("{\"total_ns\":%llu,\"lat_ns\":[", (unsigned long long)total);
        for (unsigned long i = 0; i < n; i++) printf(i ? ",%llu" : "%llu", (unsigned long long)lat[i]);
        printf("]}\n");
        fflush(stdout);
    }
    free(lat);
    return 0;
}

#endif
