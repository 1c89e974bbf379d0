/* The fencing proxy through the C ABI (sr_proxy_start() and the rest), talked to by hiredis, a
 * client nobody here wrote, as it would talk to one standalone Redis: refusals and accessors, a
 * request held past hold_ms answered FENCED, a Unix socket listener closed through a mailbox,
 * SET/GET reaching the primary, and a planned failover (SENTINEL FAILOVER) with writers
 * RPUSHing unique values through the proxy the whole time: every write the proxy acknowledged is
 * on the new primary, once, none answered FENCED was applied, and writes go on after the switch.
 *
 * Usage: test_proxy /path/to/sr-topology
 * Prints one line per test and a closing "N passed, N failed"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sentinel_recovery.h"
#include "check.h"
#include "suite.h"
#include "topology.h"

static topo_t topo;

/* A URL whose only sentinel never answers: the proxy starts anyway (it never waits for
 * discovery) and its sessions find no primary. */
#define NOWHERE "redis+sentinel://127.0.0.1:1/mymaster"

/* ---------------------------------------------------------------- helpers */

/* Splits sr_proxy_address()'s "IP:PORT" into host and port; 0 on success. */
static int split_address(const char *address, char *host, size_t host_len, int *port) {
    const char *colon = strrchr(address, ':');
    if (!colon || (size_t)(colon - address) >= host_len) return -1;
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    *port = atoi(colon + 1);
    return *port > 0 ? 0 : -1;
}

/* A hiredis connection to a TCP proxy or node, every call bounded by `timeout_s`. NULL when
 * it could not connect. */
static redisContext *connect_tcp(const char *host, int port, int timeout_s) {
    struct timeval tv = {timeout_s, 0};
    redisContext *c = redisConnectWithTimeout(host, port, tv);
    if (!c) return NULL;
    if (c->err || redisSetTimeout(c, tv) != REDIS_OK) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Whether `r` is an error reply whose text starts with `word`. */
static int is_error(const redisReply *r, const char *word) {
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, word, strlen(word)) == 0;
}

/* The value of "key":N in a flat JSON object, or -1. */
static long json_number(const char *json, const char *key) {
    return topo_json_int(json, NULL, key);
}

/* What a close's callback saw. */
typedef struct {
    atomic_int calls;
    atomic_int code;
} closed_t;

static void on_closed(void *user_data, const sr_error_t *error) {
    closed_t *c = user_data;
    atomic_store(&c->code, error ? sr_error_get_code(error) : SR_OK);
    atomic_fetch_add(&c->calls, 1);
}

/* ---------------------------------------------------------------- offline */

static void test_refusals_and_null_arguments(void) {
    sr_proxy_t *p = (sr_proxy_t *)1;
    sr_error_t *err = NULL;
    char *json = (char *)1;
    sr_option_t remote[] = {{"listen", "10.0.0.1:0"}};
    sr_option_t bad_hold[] = {{"hold_ms", "0"}};
    sr_option_t bad_client[] = {{"command_timeout_ms", "soon"}};
    sr_option_t null_value[] = {{"hold_ms", NULL}};

    CHECK_RC(sr_proxy_start("http://x/y", NULL, 0, &p, &err), SR_ERR_CONFIG);
    CHECK(p == NULL);
    CHECK(err != NULL && sr_error_get_code(err) == SR_ERR_CONFIG);
    sr_error_free(err);
    /* Not loopback without allow_remote: refused, and the message says which option. */
    CHECK_RC(sr_proxy_start(NOWHERE, remote, 1, &p, &err), SR_ERR_CONFIG);
    CHECK(strstr(sr_error_get_message(err), "allow_remote") != NULL);
    sr_error_free(err);
    CHECK_RC(sr_proxy_start(NOWHERE, bad_hold, 1, &p, &err), SR_ERR_CONFIG);
    CHECK(strstr(sr_error_get_message(err), "hold_ms") != NULL);
    sr_error_free(err);
    /* A key that is not the proxy's goes to the client, whose rule names it too. */
    CHECK_RC(sr_proxy_start(NOWHERE, bad_client, 1, &p, &err), SR_ERR_CONFIG);
    CHECK(strstr(sr_error_get_message(err), "command_timeout_ms") != NULL);
    sr_error_free(err);
    CHECK_RC(sr_proxy_start(NOWHERE, null_value, 1, &p, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_proxy_start(NOWHERE, NULL, 1, &p, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_proxy_start(NULL, NULL, 0, &p, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_proxy_start(NOWHERE, NULL, 0, NULL, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK(p == NULL);

    CHECK(sr_proxy_address(NULL) == NULL);
    CHECK_RC(sr_proxy_stats(NULL, &json, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK(json == NULL);
    CHECK_RC(sr_proxy_close(NULL, 0, NULL, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_proxy_close_blocking(NULL, 0, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_proxy_close_into(NULL, 0, NULL, 1), SR_ERR_INVALID_ARGUMENT);
    sr_proxy_free(NULL);
}

/* No primary anywhere: the proxy still listens at once, a request waits hold_ms and is
 * answered FENCED (not sent), the session stays usable, and a close calls back exactly once;
 * after it, every call on the handle says SR_ERR_CLOSED and the listener is gone. */
static void test_a_held_request_is_answered_fenced(void) {
    sr_option_t opts[] = {{"hold_ms", "300"}, {"listen", "127.0.0.1:0"}};
    sr_proxy_t *p = NULL;
    sr_error_t *err = NULL;
    char *json = NULL;
    char host[64];
    int port = 0;
    closed_t closed;
    atomic_init(&closed.calls, 0);
    atomic_init(&closed.code, -1);

    CHECK_RC(sr_proxy_start(NOWHERE, opts, 2, &p, &err), SR_OK);
    CHECK(err == NULL);
    CHECK(strncmp(sr_proxy_address(p), "127.0.0.1:", 10) == 0);
    CHECK(split_address(sr_proxy_address(p), host, sizeof host, &port) == 0);
    redisContext *c = connect_tcp(host, port, 20);
    CHECK(c != NULL);
    long start = now_ms();
    redisReply *r = redisCommand(c, "PING");
    CHECK(is_error(r, "FENCED"));
    CHECK(now_ms() - start >= 250);
    freeReplyObject(r);
    r = redisCommand(c, "SET %s %s", "k", "v");
    CHECK(is_error(r, "FENCED"));
    freeReplyObject(r);

    CHECK_RC(sr_proxy_stats(p, &json, &err), SR_OK);
    CHECK(json_number(json, "sessions_open") == 1);
    CHECK(json_number(json, "sessions_accepted") == 1);
    CHECK(json_number(json, "held_expired") == 2);
    CHECK(json_number(json, "commands_forwarded") == 0);
    sr_string_free(json);

    CHECK_RC(sr_proxy_close(p, 0, on_closed, &closed), SR_OK);
    for (int i = 0; i < 1000 && atomic_load(&closed.calls) == 0; i++) usleep(10000);
    CHECK(atomic_load(&closed.calls) == 1);
    CHECK(atomic_load(&closed.code) == SR_OK);
    /* The session was closed with the proxy. */
    r = redisCommand(c, "PING");
    CHECK(r == NULL);
    redisFree(c);
    /* Closed: refused, and never a second callback. */
    CHECK_RC(sr_proxy_close(p, 0, on_closed, &closed), SR_ERR_CLOSED);
    CHECK_RC(sr_proxy_close_blocking(p, 0, &err), SR_ERR_CLOSED);
    sr_error_free(err);
    CHECK_RC(sr_proxy_stats(p, &json, NULL), SR_ERR_CLOSED);
    CHECK(json == NULL);
    CHECK(sr_proxy_address(p) != NULL); /* valid until freed */
    c = connect_tcp(host, port, 5);
    CHECK(c == NULL); /* nothing listens there any more */
    usleep(100000);
    CHECK(atomic_load(&closed.calls) == 1);
    sr_proxy_free(p);
}

/* A mailbox drained on this thread: the wake-up posts a semaphore. */
typedef struct {
    sem_t woken;
    int completions;
    uint64_t op_id;
    int error_code;
    int bad;
} box_t;

static void on_wake(void *user_data) { sem_post(&((box_t *)user_data)->woken); }

static void on_delivery(void *user_data, const sr_delivery_t *d) {
    box_t *b = user_data;
    if (d->kind != SR_DELIVERY_COMPLETION || d->reply || d->results || d->topology || d->json) {
        b->bad++;
        return;
    }
    b->completions++;
    b->op_id = d->op_id;
    b->error_code = d->error ? sr_error_get_code(d->error) : SR_OK;
}

/* A Unix socket listener: the address says unix:PATH, the socket is the owner's only, hiredis
 * reaches it, and a close through a mailbox completes there once and removes the socket. */
static void test_unix_socket_closed_through_a_mailbox(void) {
    char path[128], listen[160];
    struct stat st;
    sr_proxy_t *p = NULL;
    sr_mailbox_t *mb = NULL;
    sr_error_t *err = NULL;
    box_t b;
    memset(&b, 0, sizeof b);
    sem_init(&b.woken, 0, 0);
    snprintf(path, sizeof path, "/tmp/sr-test-proxy-%d.sock", (int)getpid());
    snprintf(listen, sizeof listen, "unix:%s", path);
    unlink(path);
    sr_option_t opts[] = {{"listen", listen}, {"hold_ms", "200"}};

    CHECK_RC(sr_proxy_start(NOWHERE, opts, 2, &p, &err), SR_OK);
    CHECK(strcmp(sr_proxy_address(p), listen) == 0);
    CHECK(stat(path, &st) == 0 && S_ISSOCK(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);
    redisContext *c = redisConnectUnix(path);
    CHECK(c != NULL && !c->err);
    redisReply *r = redisCommand(c, "PING");
    CHECK(is_error(r, "FENCED"));
    freeReplyObject(r);
    redisFree(c);

    CHECK_RC(sr_mailbox_new(16, on_wake, &b, &mb), SR_OK);
    CHECK_RC(sr_proxy_close_into(p, 0, NULL, 7), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_proxy_close_into(p, 0, mb, 42), SR_OK);
    for (int i = 0; i < 100 && b.completions == 0; i++) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 1;
        if (sem_timedwait(&b.woken, &deadline) == 0) CHECK_RC(sr_mailbox_drain(mb, on_delivery, &b, NULL), SR_OK);
    }
    CHECK(b.completions == 1 && b.bad == 0);
    CHECK(b.op_id == 42 && b.error_code == SR_OK);
    CHECK(stat(path, &st) != 0); /* removed at close */
    CHECK_RC(sr_proxy_close_into(p, 0, mb, 43), SR_ERR_CLOSED);
    CHECK_RC(sr_mailbox_close(mb, on_delivery, &b), SR_OK);
    CHECK(b.completions == 1);
    sr_mailbox_free(mb);
    sr_proxy_free(p);
    sem_destroy(&b.woken);
}

/* ---------------------------------------------------------------- live */

/* SET and GET through the proxy reach the primary; a blocking close frees the address. */
static void test_set_and_get_reach_the_primary(void) {
    sr_proxy_t *p = NULL;
    sr_error_t *err = NULL;
    char *json = NULL;
    char host[64], key[64];
    int port;
    snprintf(key, sizeof key, "c:proxy:%d", (int)getpid());

    CHECK_RC(sr_proxy_start(topo.url, NULL, 0, &p, &err), SR_OK);
    CHECK(split_address(sr_proxy_address(p), host, sizeof host, &port) == 0);
    redisContext *c = connect_tcp(host, port, 20);
    CHECK(c != NULL);
    redisReply *r = redisCommand(c, "SET %s %s", key, "through the proxy");
    CHECK(r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0);
    freeReplyObject(r);
    r = redisCommand(c, "GET %s", key);
    CHECK(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "through the proxy") == 0);
    freeReplyObject(r);
    redisFree(c);

    /* It is on the primary itself. */
    CHECK(topo_cmd(&topo, "primary") == 0);
    int primary = (int)topo_json_int(topo.line, NULL, "port");
    redisContext *direct = connect_tcp("127.0.0.1", primary, 10);
    CHECK(direct != NULL);
    r = redisCommand(direct, "GET %s", key);
    CHECK(r && r->type == REDIS_REPLY_STRING && strcmp(r->str, "through the proxy") == 0);
    freeReplyObject(r);
    redisFree(direct);

    CHECK_RC(sr_proxy_stats(p, &json, &err), SR_OK);
    CHECK(json_number(json, "commands_forwarded") >= 2);
    CHECK(json_number(json, "sessions_accepted") == 1);
    sr_string_free(json);
    CHECK_RC(sr_proxy_close_blocking(p, 500, &err), SR_OK);
    c = connect_tcp(host, port, 5);
    CHECK(c == NULL);
    sr_proxy_free(p);
}

/* ---------------------------------------------------------------- planned failover */

#define WRITERS 2
#define MAX_WRITES 200000
#define FAILOVER_KEY_FMT "c:proxy:failover:%d"

/* One writer: its own hiredis connection to the proxy (reopened when it breaks), RPUSHing
 * "wN-I" for I = 0, 1, ...; fate[I] says what it learned: 'A' acknowledged, 'F' answered
 * FENCED or READONLY (never applied), 'U' uncertain (UNCERTAIN, a broken connection, any other
 * error). */
typedef struct {
    int id;
    char host[64];
    int port;
    const char *key;
    atomic_int stop;
    atomic_long acked;
    long sent;
    char *fate;
    long fenced, uncertain, broken, other, reconnects;
    char other_text[160];
} writer_t;

static void *write_until_stopped(void *arg) {
    writer_t *w = arg;
    redisContext *c = NULL;
    char value[32];
    while (!atomic_load(&w->stop) && w->sent < MAX_WRITES) {
        if (!c) {
            c = connect_tcp(w->host, w->port, 20);
            if (!c) {
                w->reconnects++;
                usleep(10000);
                continue;
            }
        }
        long i = w->sent++;
        snprintf(value, sizeof value, "w%d-%ld", w->id, i);
        redisReply *r = redisCommand(c, "RPUSH %s %s", w->key, value);
        if (!r) {
            w->fate[i] = 'U';
            w->broken++;
            redisFree(c);
            c = NULL;
            continue;
        }
        if (r->type == REDIS_REPLY_INTEGER) {
            w->fate[i] = 'A';
            atomic_fetch_add(&w->acked, 1);
        } else if (is_error(r, "FENCED") || is_error(r, "READONLY")) {
            w->fate[i] = 'F';
            w->fenced++;
        } else {
            w->fate[i] = 'U';
            if (is_error(r, "UNCERTAIN")) {
                w->uncertain++;
            } else {
                if (!w->other++) snprintf(w->other_text, sizeof w->other_text, "%s", r->str ? r->str : "?");
            }
        }
        freeReplyObject(r);
    }
    if (c) redisFree(c);
    return NULL;
}

/* Waits until every writer has `want` acknowledged writes more than `base[i]`; 0 if so. */
static int wait_acked(writer_t *w, const long *base, long want, long timeout_ms) {
    long deadline = now_ms() + timeout_ms;
    for (;;) {
        int all = 1;
        for (int i = 0; i < WRITERS; i++) all &= atomic_load(&w[i].acked) - base[i] >= want;
        if (all) return 0;
        if (now_ms() > deadline) return -1;
        usleep(20000);
    }
}

/* The acknowledged-write check of a planned failover: writers RPUSH through the proxy while
 * SENTINEL FAILOVER runs; afterwards the new primary (ROLE master) holds every acknowledged
 * value exactly once and none answered FENCED, and writes were acknowledged after the switch.
 * Last: it changes the topology. */
static void test_a_planned_failover_loses_no_acknowledged_write(void) {
    static writer_t w[WRITERS];
    pthread_t threads[WRITERS];
    int started = 0;
    sr_proxy_t *p = NULL;
    sr_error_t *err = NULL;
    char key[64], line[96], *json = NULL;
    long zero[WRITERS] = {0}, at_switch[WRITERS];
    /* Generous bounds for a run under valgrind. */
    sr_option_t opts[] = {{"hold_ms", "15000"}, {"command_timeout_ms", "15000"}};
    snprintf(key, sizeof key, FAILOVER_KEY_FMT, (int)getpid());

    CHECK_RC(sr_proxy_start(topo.url, opts, 2, &p, &err), SR_OK);
    CHECK(topo_cmd(&topo, "primary") == 0);
    int old = (int)topo_json_int(topo.line, NULL, "port");
    CHECK(old > 0);
    for (int i = 0; i < WRITERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].id = i;
        w[i].key = key;
        atomic_init(&w[i].stop, 0);
        atomic_init(&w[i].acked, 0);
        CHECK(split_address(sr_proxy_address(p), w[i].host, sizeof w[i].host, &w[i].port) == 0);
        w[i].fate = calloc(MAX_WRITES, 1);
        CHECK(w[i].fate != NULL);
    }
    for (; started < WRITERS; started++) {
        if (pthread_create(&threads[started], NULL, write_until_stopped, &w[started])) break;
    }
    int ok = started == WRITERS && wait_acked(w, zero, 20, 60000) == 0;
    int new_port = -1;
    if (ok) {
        ok = topo_cmd(&topo, "failover") == 0;
        snprintf(line, sizeof line, "wait-primary-not %d 60000", old);
        ok = ok && topo_cmd(&topo, line) == 0;
        if (ok) new_port = (int)topo_json_int(topo.line, NULL, "port");
        for (int i = 0; i < WRITERS; i++) at_switch[i] = atomic_load(&w[i].acked);
        /* Writes go on after the sentinels switched, through the same proxy. */
        ok = ok && wait_acked(w, at_switch, 20, 60000) == 0;
    }
    for (int i = 0; i < WRITERS; i++) atomic_store(&w[i].stop, 1);
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < WRITERS; i++) {
        printf("    writer %d: sent %ld, acknowledged %ld (%ld after the switch), fenced %ld, uncertain %ld, "
               "broken %ld, other errors %ld%s%s, reconnects %ld\n",
               i, w[i].sent, atomic_load(&w[i].acked), atomic_load(&w[i].acked) - at_switch[i], w[i].fenced,
               w[i].uncertain, w[i].broken, w[i].other, w[i].other ? ": " : "", w[i].other_text, w[i].reconnects);
    }
    if (sr_proxy_stats(p, &json, NULL) == SR_OK) {
        printf("    proxy stats: %s\n", json);
        CHECK(json_number(json, "primary_changes") >= 1);
        sr_string_free(json);
    }
    CHECK_RC(sr_proxy_close_blocking(p, 1000, &err), SR_OK);
    sr_proxy_free(p);
    CHECK(ok);
    CHECK(new_port > 0 && new_port != old);

    /* Judge on the new primary itself. */
    redisContext *c = connect_tcp("127.0.0.1", new_port, 20);
    CHECK(c != NULL);
    redisReply *r = redisCommand(c, "ROLE");
    CHECK(r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING &&
          strcmp(r->element[0]->str, "master") == 0);
    freeReplyObject(r);
    r = redisCommand(c, "LRANGE %s 0 -1", key);
    CHECK(r && r->type == REDIS_REPLY_ARRAY);
    unsigned char *seen[WRITERS];
    long stray = 0;
    for (int i = 0; i < WRITERS; i++) seen[i] = calloc(MAX_WRITES, 1);
    for (size_t e = 0; e < r->elements; e++) {
        int id;
        long n;
        const redisReply *v = r->element[e];
        if (v->type != REDIS_REPLY_STRING || sscanf(v->str, "w%d-%ld", &id, &n) != 2 || id < 0 || id >= WRITERS ||
            n < 0 || n >= w[id].sent) {
            stray++;
            continue;
        }
        if (seen[id][n] < 255) seen[id][n]++;
    }
    long acked = 0, lost = 0, twice = 0, fenced_but_present = 0, uncertain_present = 0;
    for (int i = 0; i < WRITERS; i++) {
        for (long n = 0; n < w[i].sent; n++) {
            if (seen[i][n] > 1) twice++;
            if (w[i].fate[n] == 'A') {
                acked++;
                if (!seen[i][n]) lost++;
            } else if (w[i].fate[n] == 'F' && seen[i][n]) {
                fenced_but_present++;
            } else if (w[i].fate[n] == 'U' && seen[i][n]) {
                uncertain_present++;
            }
        }
    }
    printf("    on the new primary %d: %zu values; acknowledged %ld, lost %ld, applied twice %ld, "
           "answered FENCED but present %ld, uncertain and present %ld, stray %ld\n",
           new_port, r->elements, acked, lost, twice, fenced_but_present, uncertain_present, stray);
    freeReplyObject(r);
    redisFree(c);
    for (int i = 0; i < WRITERS; i++) {
        free(seen[i]);
        free(w[i].fate);
    }
    CHECK(acked >= 4 * WRITERS * 10);
    CHECK(lost == 0);
    CHECK(twice == 0);
    CHECK(fenced_but_present == 0);
    CHECK(stray == 0);
}

int main(int argc, char **argv) {
    static const test_t offline[] = {
        {"refusals_and_null_arguments", test_refusals_and_null_arguments},
        {"a_held_request_is_answered_fenced", test_a_held_request_is_answered_fenced},
        {"unix_socket_closed_through_a_mailbox", test_unix_socket_closed_through_a_mailbox},
    };
    static const test_t live[] = {
        {"set_and_get_reach_the_primary", test_set_and_get_reach_the_primary},
        {"a_planned_failover_loses_no_acknowledged_write", test_a_planned_failover_loses_no_acknowledged_write},
    };
    /* A session the proxy closes must not kill this process when hiredis writes to it. */
    signal(SIGPIPE, SIG_IGN);
    int rc = RUN_SUITE(argc, argv, &topo, offline, live);
    /* Stop the core's threads so leak checkers see a quiet process. */
    sr_runtime_shutdown(5000);
    return rc;
}
