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

#include <hiredis/hiredis.h>

#include "worker.h"

static redisContext *ctx;
static const char *argv_get[2] = {"GET", KEY};
static const size_t argv_len[2] = {3, sizeof KEY - 1};

static void get_once(void) {
    redisReply *r = redisCommandArgv(ctx, 2, argv_get, argv_len);
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "hiredis_loop: GET failed: %s\n", r ? r->str : ctx->errstr);
        exit(1);
    }
    freeReplyObject(r);
}

int main(int argc, char **argv) {
    if (argc != 4 || strcmp(argv[1], "--serve") != 0) {
        fprintf(stderr, "usage: hiredis_loop --serve HOST PORT\n");
        return 2;
    }
    ctx = redisConnect(argv[2], atoi(argv[3]));
    if (ctx == NULL || ctx->err) {
        fprintf(stderr, "hiredis_loop: connect failed: %s\n", ctx ? ctx->errstr : "out of memory");
        return 1;
    }
    int rc = serve_rounds(get_once);
    redisFree(ctx);
    return rc;
}
