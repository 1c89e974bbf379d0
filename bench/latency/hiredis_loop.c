/* hiredis_loop: sequential GET with hiredis' synchronous API (redisCommandArgv), straight to the
 * primary: the "hiredis-style sync I/O" peer of the C ABI.
 *
 *   hiredis_loop --serve HOST PORT   worker for run.py, same protocol as c_loop --serve
 *
 * Build (needs Debian's libhiredis-dev): see mk/bench.mk. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <hiredis/hiredis.h>

#define KEY "key:__rand_int__"

static redisContext *ctx;
static const char *argv_get[2] = {"GET", KEY};
static const size_t argv_len[2] = {3, sizeof KEY - 1};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void get_once(void) {
    redisReply *r = redisCommandArgv(ctx, 2, argv_get, argv_len);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "hiredis_loop: GET failed: %s\n", r ? r->str : ctx->errstr);
        exit(1);
    }
    freeReplyObject(r);
}

int main(int argc, char **argv) {
    char line[128];
    uint64_t *lat = NULL;
    size_t cap = 0;
    if (argc != 4 || strcmp(argv[1], "--serve") != 0) {
        fprintf(stderr, "usage: hiredis_loop --serve HOST PORT\n");
        return 2;
    }
    ctx = redisConnect(argv[2], atoi(argv[3]));
    if (ctx == NULL || ctx->err) {
        fprintf(stderr, "hiredis_loop: connect failed: %s\n", ctx ? ctx->errstr : "out of memory");
        return 1;
    }
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
    redisFree(ctx);
    return 0;
}
