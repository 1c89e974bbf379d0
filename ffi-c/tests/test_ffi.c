/* C tests of libsentinel_recovery against a real Redis + Sentinel topology (sr-topology).
 *
 * Usage: test_ffi /path/to/sr-topology
 * Prints one line per test and a closing "N passed, N failed"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sentinel_recovery.h"
#include "check.h"
#include "suite.h"
#include "topology.h"

/* The test hook of a library built with the `test-hooks` feature (run.sh builds it so); not in
 * the header, which has the shipped API only. Starts an operation whose work panics on a core
 * thread: `callback` gets SR_ERR_INTERNAL, once. */
int sr_client_panic_for_test(sr_client_t *client, sr_reply_cb callback, void *user_data);

static topo_t topo;

static void deadline_in(struct timespec *ts, long ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Opens a client on the topology; NULL on failure (reported). */
static sr_client_t *open_client(void) {
    sr_client_t *c = NULL;
    sr_error_t *err = NULL;
    sr_option_t opts[] = {{"command_timeout_ms", "10000"}};
    int rc = sr_client_open(topo.url, opts, 1, &c, &err);
    if (rc != SR_OK) {
        fprintf(stderr, "    open failed: %d %s\n", rc, sr_error_get_message(err));
        sr_error_free(err);
        return NULL;
    }
    return c;
}

/* Runs a command given as NUL-terminated strings; returns the owned reply or NULL (rc in *rc). */
static sr_reply_t *run(sr_client_t *c, int *rc, sr_error_t **err, size_t argc, const char **argv) {
    sr_reply_t *reply = NULL;
    *rc = sr_client_execute_blocking(c, argc, argv, NULL, &reply, err);
    return reply;
}

#define RUN(c, rc, err, ...)                                                              \
    run((c), (rc), (err), sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *), \
        (const char *[]){__VA_ARGS__})

static int bytes_eq(const sr_reply_t *r, const char *want) {
    const uint8_t *p = NULL;
    size_t n = 0;
    if (sr_reply_bytes(r, &p, &n) != SR_OK) return 0;
    return n == strlen(want) && memcmp(p, want, n) == 0;
}

/* ---------------------------------------------------------------- tests without servers */

/* close with commands in flight: every completion runs exactly once, with SR_ERR_CLOSED, before
 * sr_client_close returns, and none after (the host layer's guarantee, seen from C). */
typedef struct {
    atomic_int completed;
    atomic_int closed;
    atomic_int after_close;
    atomic_int close_returned;
} inflight_t;

static void on_inflight(void *user_data, const sr_reply_t *reply, const sr_error_t *error) {
    inflight_t *s = user_data;
    (void)reply;
    if (atomic_load(&s->close_returned)) atomic_fetch_add(&s->after_close, 1);
    if (error && sr_error_get_code(error) == SR_ERR_CLOSED) atomic_fetch_add(&s->closed, 1);
    atomic_fetch_add(&s->completed, 1);
}

static void test_close_with_2000_commands_in_flight(void) {
    /* A sentinel that refuses: every command waits for a primary until close. */
    sr_client_t *c = NULL;
    sr_option_t opts[] = {{"queue_size", "5000"}, {"command_timeout_ms", "60000"}};
    inflight_t s;
    const char *argv[] = {"GET", "k"};
    memset(&s, 0, sizeof s);
    CHECK_RC(sr_client_open("redis+sentinel://127.0.0.1:1/mymaster", opts, 2, &c, NULL), SR_OK);
    for (int i = 0; i < 2000; i++) CHECK_RC(sr_client_execute(c, 2, argv, NULL, on_inflight, &s), SR_OK);
    CHECK_RC(sr_client_close(c), SR_OK);
    atomic_store(&s.close_returned, 1);
    CHECK(atomic_load(&s.completed) == 2000);
    CHECK(atomic_load(&s.closed) == 2000);
    usleep(100000);
    CHECK(atomic_load(&s.completed) == 2000); /* exactly once */
    CHECK(atomic_load(&s.after_close) == 0);
    sr_client_free(c);
}

/* A panic inside the library (on a core thread) reaches the host as SR_ERR_INTERNAL, exactly
 * once, through the callback; the process and the client go on. */
static void on_panic_test(void *user_data, const sr_reply_t *reply, const sr_error_t *error) {
    inflight_t *s = user_data;
    if (!reply && error && sr_error_get_code(error) == SR_ERR_INTERNAL) atomic_fetch_add(&s->closed, 1);
    atomic_fetch_add(&s->completed, 1);
}

static void test_a_panic_is_internal(void) {
    sr_client_t *c = NULL;
    inflight_t s;
    memset(&s, 0, sizeof s);
    CHECK_RC(sr_client_open("redis+sentinel://127.0.0.1:1/mymaster", NULL, 0, &c, NULL), SR_OK);
    CHECK_RC(sr_client_panic_for_test(c, on_panic_test, &s), SR_OK);
    CHECK_RC(sr_client_panic_for_test(c, NULL, &s), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_panic_for_test(NULL, on_panic_test, &s), SR_ERR_INVALID_ARGUMENT);
    for (int i = 0; i < 1000 && atomic_load(&s.completed) == 0; i++) usleep(5000);
    CHECK(atomic_load(&s.completed) == 1);
    CHECK(atomic_load(&s.closed) == 1); /* counted here: completions with SR_ERR_INTERNAL */
    CHECK_RC(sr_client_close(c), SR_OK);
    CHECK(atomic_load(&s.completed) == 1);
    sr_client_free(c);
}

static void test_version_and_error_texts(void) {
    CHECK(sr_version() != NULL && strlen(sr_version()) >= 5);
    CHECK(strcmp(sr_error_code_name(SR_ERR_NO_HEALTHY_PRIMARY), "no_healthy_primary") == 0);
    CHECK(strcmp(sr_error_code_name(SR_OK), "ok") == 0);
    CHECK(strcmp(sr_error_code_name(SR_ERR_INVALID_ARGUMENT), "invalid_argument") == 0);
    CHECK(strlen(sr_error_message(SR_ERR_TIMEOUT)) > 0);
    CHECK(strcmp(sr_error_message(424242), "unknown error code") == 0);
}

static void test_bad_urls_and_options(void) {
    sr_client_t *c = (sr_client_t *)1;
    sr_error_t *err = NULL;
    CHECK_RC(sr_client_open("http://localhost/mymaster", NULL, 0, &c, &err), SR_ERR_CONFIG);
    CHECK(c == NULL);
    CHECK(sr_error_get_code(err) == SR_ERR_CONFIG);
    CHECK(strstr(sr_error_get_message(err), "scheme") != NULL);
    sr_error_free(err);

    /* The password never appears in an error. */
    err = NULL;
    CHECK_RC(sr_client_open("redis+sentinel://user:s3cretpw@host:notaport/m", NULL, 0, &c, &err),
             SR_ERR_CONFIG);
    CHECK(strstr(sr_error_get_message(err), "s3cretpw") == NULL);
    sr_error_free(err);

    sr_option_t bad[] = {{"sentinel_password", "s3cretpw"}, {"no_such_option", "1"}};
    err = NULL;
    CHECK_RC(sr_client_open("redis+sentinel://127.0.0.1:1/m", bad, 2, &c, &err), SR_ERR_CONFIG);
    CHECK(strstr(sr_error_get_message(err), "no_such_option") != NULL);
    CHECK(strstr(sr_error_get_message(err), "s3cretpw") == NULL);
    sr_error_free(err);

    /* error out-parameter is optional */
    CHECK_RC(sr_client_open("redis+sentinel:///", NULL, 0, &c, NULL), SR_ERR_CONFIG);
}

static void test_null_arguments(void) {
    sr_client_t *c = NULL;
    sr_error_t *err = NULL;
    sr_reply_t *reply = NULL;
    sr_topology_t *t = NULL;
    const char *argv[] = {"PING"};
    int64_t i;
    size_t n;
    const uint8_t *p;
    const sr_reply_t *elem;

    CHECK_RC(sr_client_open(NULL, NULL, 0, &c, &err), SR_ERR_INVALID_ARGUMENT);
    CHECK(sr_error_get_code(err) == SR_ERR_INVALID_ARGUMENT);
    sr_error_free(err);
    CHECK_RC(sr_client_open("redis+sentinel://127.0.0.1:1/m", NULL, 0, NULL, NULL),
             SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_open("redis+sentinel://127.0.0.1:1/m", NULL, 3, &c, NULL),
             SR_ERR_INVALID_ARGUMENT);
    sr_option_t null_key[] = {{NULL, "1"}};
    CHECK_RC(sr_client_open("redis+sentinel://127.0.0.1:1/m", null_key, 1, &c, NULL),
             SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_execute(NULL, 1, argv, NULL, NULL, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_execute_blocking(NULL, 1, argv, NULL, &reply, NULL),
             SR_ERR_INVALID_ARGUMENT);
    CHECK(reply == NULL);
    CHECK_RC(sr_client_topology(NULL, &t, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_wait_ready(NULL, NULL, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_set_event_callback(NULL, NULL, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_close(NULL), SR_ERR_INVALID_ARGUMENT);
    sr_client_free(NULL);
    CHECK(sr_reply_type(NULL) == SR_REPLY_INVALID);
    CHECK_RC(sr_reply_integer(NULL, &i), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_reply_bytes(NULL, &p, &n), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_reply_len(NULL, &n), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_reply_element(NULL, 0, &elem), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_reply_map_entry(NULL, 0, &elem, &elem), SR_ERR_INVALID_ARGUMENT);
    CHECK(sr_reply_clone(NULL) == NULL);
    sr_reply_free(NULL);
    CHECK(sr_error_get_code(NULL) == SR_ERR_INVALID_ARGUMENT);
    CHECK(sr_error_get_message(NULL) == NULL);
    CHECK(sr_error_clone(NULL) == NULL);
    sr_error_free(NULL);
    sr_topology_free(NULL);
    CHECK(sr_event_clone(NULL) == NULL);
    sr_event_free(NULL);
    /* Worker count can't change while the runtime runs (it starts with the first client). */
    CHECK_RC(sr_runtime_set_worker_threads(0, &err), SR_ERR_CONFIG);
    sr_error_free(err);
}

/* ---------------------------------------------------------------- tests against the topology */

static void test_open_ready_and_topology(void) {
    sr_client_t *c = open_client();
    sr_topology_t *t = NULL;
    sr_error_t *err = NULL;
    CHECK(c != NULL);
    CHECK_RC(sr_client_wait_ready(c, &t, &err), SR_OK);
    CHECK(t != NULL && t->primary != NULL);
    CHECK(t->healthy);
    CHECK(t->primary->port == topo.primary_port);
    CHECK(strcmp(t->service, "mymaster") == 0);
    CHECK(t->sentinels_len >= 3);
    for (size_t i = 0; i < t->sentinels_len; i++) CHECK(t->sentinels[i].host && t->sentinels[i].port);
    sr_topology_free(t);
    t = NULL;
    CHECK_RC(sr_client_topology(c, &t, &err), SR_OK);
    CHECK(t->primary && t->primary->port == topo.primary_port);
    printf("    primary %s:%u, %zu replicas, %zu sentinels, epoch %llu\n", t->primary->host,
           t->primary->port, t->replicas_len, t->sentinels_len, (unsigned long long)t->epoch);
    sr_topology_free(t);
    CHECK_RC(sr_client_close(c), SR_OK);
    sr_client_free(c);
}

static void test_execute_blocking_and_reply_types(void) {
    sr_client_t *c = open_client();
    sr_error_t *err = NULL;
    sr_reply_t *r;
    int rc;
    int64_t i;
    double d;
    bool b;
    size_t n;
    const uint8_t *p;
    const sr_reply_t *k, *v, *e;
    CHECK(c != NULL);

    /* simple string, bulk (binary safe, with explicit lengths), nil */
    const char *set_argv[] = {"SET", "c:bin", "a\0b"};
    size_t set_len[] = {3, 5, 3};
    r = NULL;
    CHECK_RC(sr_client_execute_blocking(c, 3, set_argv, set_len, &r, &err), SR_OK);
    CHECK(err == NULL);
    CHECK(sr_reply_type(r) == SR_REPLY_SIMPLE && bytes_eq(r, "OK"));
    sr_reply_free(r);
    r = RUN(c, &rc, &err, "GET", "c:bin");
    CHECK_RC(rc, SR_OK);
    CHECK(sr_reply_type(r) == SR_REPLY_BULK);
    CHECK_RC(sr_reply_bytes(r, &p, &n), SR_OK);
    CHECK(n == 3 && memcmp(p, "a\0b", 3) == 0);
    CHECK_RC(sr_reply_integer(r, &i), SR_ERR_WRONG_TYPE);
    sr_reply_free(r);
    r = RUN(c, &rc, &err, "GET", "c:missing");
    CHECK_RC(rc, SR_OK);
    CHECK(sr_reply_type(r) == SR_REPLY_NIL);
    sr_reply_free(r);

    /* integer */
    sr_reply_free(RUN(c, &rc, &err, "DEL", "c:n"));
    r = RUN(c, &rc, &err, "INCRBY", "c:n", "41");
    CHECK_RC(rc, SR_OK);
    CHECK_RC(sr_reply_integer(r, &i), SR_OK);
    CHECK(i == 41);
    sr_reply_free(r);

    /* top-level error reply */
    r = RUN(c, &rc, &err, "INCR", "c:bin");
    CHECK_RC(rc, SR_ERR_SERVER);
    CHECK(r == NULL && err != NULL);
    CHECK(sr_error_get_code(err) == SR_ERR_SERVER);
    CHECK(strcmp(sr_error_get_server_code(err), "ERR") == 0);
    CHECK(strstr(sr_error_get_message(err), "not an integer") != NULL);
    sr_error_free(err);
    err = NULL;

    /* map (RESP3 HGETALL) */
    sr_reply_free(RUN(c, &rc, &err, "DEL", "c:h"));
    sr_reply_free(RUN(c, &rc, &err, "HSET", "c:h", "f", "v"));
    r = RUN(c, &rc, &err, "HGETALL", "c:h");
    CHECK_RC(rc, SR_OK);
    CHECK(sr_reply_type(r) == SR_REPLY_MAP);
    CHECK_RC(sr_reply_len(r, &n), SR_OK);
    CHECK(n == 1);
    CHECK_RC(sr_reply_map_entry(r, 0, &k, &v), SR_OK);
    CHECK(bytes_eq(k, "f") && bytes_eq(v, "v"));
    CHECK_RC(sr_reply_map_entry(r, 1, &k, &v), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_reply_element(r, 0, &e), SR_ERR_WRONG_TYPE);
    sr_reply_free(r);

    /* set (RESP3 SMEMBERS) */
    sr_reply_free(RUN(c, &rc, &err, "DEL", "c:s"));
    sr_reply_free(RUN(c, &rc, &err, "SADD", "c:s", "x", "y"));
    r = RUN(c, &rc, &err, "SMEMBERS", "c:s");
    CHECK_RC(rc, SR_OK);
    CHECK(sr_reply_type(r) == SR_REPLY_SET);
    CHECK_RC(sr_reply_len(r, &n), SR_OK);
    CHECK(n == 2);
    CHECK_RC(sr_reply_element(r, 1, &e), SR_OK);
    CHECK(sr_reply_type(e) == SR_REPLY_BULK);
    CHECK_RC(sr_reply_element(r, 2, &e), SR_ERR_INVALID_ARGUMENT);
    sr_reply_free(r);

    /* double (RESP3 ZSCORE) */
    sr_reply_free(RUN(c, &rc, &err, "DEL", "c:z"));
    sr_reply_free(RUN(c, &rc, &err, "ZADD", "c:z", "1.5", "m"));
    r = RUN(c, &rc, &err, "ZSCORE", "c:z", "m");
    CHECK_RC(rc, SR_OK);
    CHECK(sr_reply_type(r) == SR_REPLY_DOUBLE);
    CHECK_RC(sr_reply_double(r, &d), SR_OK);
    CHECK(d == 1.5);
    sr_reply_free(r);

    /* array with a nested error, nil and integer (Lua table with an error element) */
    r = RUN(c, &rc, &err, "EVAL", "return {7, redis.error_reply('ERR inner'), false}", "0");
    CHECK_RC(rc, SR_OK);
    CHECK(sr_reply_type(r) == SR_REPLY_ARRAY);
    CHECK_RC(sr_reply_len(r, &n), SR_OK);
    CHECK(n >= 2);
    CHECK_RC(sr_reply_element(r, 0, &e), SR_OK);
    CHECK(sr_reply_type(e) == SR_REPLY_INTEGER);
    CHECK_RC(sr_reply_element(r, 1, &e), SR_OK);
    CHECK(sr_reply_type(e) == SR_REPLY_ERROR);
    CHECK(bytes_eq(e, "ERR inner"));
    sr_reply_free(r);

    /* boolean (a RESP3 script reply; Redis 7.0 converts Lua booleans to RESP3 only after
       redis.setresp(3)). Push replies never reach execute: subscriptions are refused on the
       shared connection, so SR_REPLY_PUSH is covered by the Rust unit tests only. */
    r = RUN(c, &rc, &err, "EVAL", "redis.setresp(3); return true", "0");
    CHECK_RC(rc, SR_OK);
    CHECK(sr_reply_type(r) == SR_REPLY_BOOLEAN);
    CHECK_RC(sr_reply_boolean(r, &b), SR_OK);
    CHECK(b);
    sr_reply_free(r);

    /* big number (Lua {big_number=...} to a RESP3 client) */
    r = RUN(c, &rc, &err, "EVAL", "return {big_number='123456789012345678901234567890'}", "0");
    CHECK_RC(rc, SR_OK);
    CHECK(sr_reply_type(r) == SR_REPLY_BIG_NUMBER);
    CHECK(bytes_eq(r, "123456789012345678901234567890"));
    sr_reply_free(r);

    /* verbatim string (RESP3 INFO) */
    r = RUN(c, &rc, &err, "INFO", "server");
    CHECK_RC(rc, SR_OK);
    CHECK(sr_reply_type(r) == SR_REPLY_VERBATIM);
    CHECK_RC(sr_reply_verbatim_format(r, &p, &n), SR_OK);
    CHECK(n == 3 && memcmp(p, "txt", 3) == 0);
    CHECK_RC(sr_reply_bytes(r, &p, &n), SR_OK);
    CHECK(n > 10 && memcmp(p, "# Server", 8) == 0);
    /* an owned copy outlives the original */
    sr_reply_t *copy = sr_reply_clone(r);
    sr_reply_free(r);
    CHECK(sr_reply_type(copy) == SR_REPLY_VERBATIM);
    sr_reply_free(copy);

    /* argument errors and refused commands */
    const char *none[] = {NULL};
    r = NULL;
    CHECK_RC(sr_client_execute_blocking(c, 0, none, NULL, &r, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_execute_blocking(c, 1, none, NULL, &r, NULL), SR_ERR_INVALID_ARGUMENT);
    r = RUN(c, &rc, &err, "MULTI");
    CHECK_RC(rc, SR_ERR_CONFIG);
    sr_error_free(err);
    err = NULL;

    CHECK_RC(sr_client_close(c), SR_OK);
    sr_client_free(c);
}

/* A completion waited for by the test thread. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int rc;
    int64_t value;
    char thread_name[32];
    int on_caller_thread;
    pthread_t caller;
} waiter_t;

static void waiter_init(waiter_t *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->caller = pthread_self();
}

static void waiter_destroy(waiter_t *w) {
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

static int waiter_wait(waiter_t *w, int count, long ms) {
    struct timespec ts;
    deadline_in(&ts, ms);
    pthread_mutex_lock(&w->mu);
    while (w->done < count)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts)) break;
    int ok = w->done >= count;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

static void on_reply(void *user_data, const sr_reply_t *reply, const sr_error_t *error) {
    waiter_t *w = user_data;
    int64_t v = -1;
    pthread_mutex_lock(&w->mu);
    w->rc = error ? sr_error_get_code(error) : SR_OK;
    if (reply && sr_reply_integer(reply, &v) == SR_OK) w->value = v;
    pthread_getname_np(pthread_self(), w->thread_name, sizeof w->thread_name);
    w->on_caller_thread = pthread_equal(pthread_self(), w->caller);
    w->done++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void test_execute_with_callback(void) {
    sr_client_t *c = open_client();
    waiter_t w;
    const char *argv[] = {"INCRBY", "c:cb", "5"};
    CHECK(c != NULL);
    waiter_init(&w);
    CHECK_RC(sr_client_execute(c, 3, argv, NULL, on_reply, &w), SR_OK);
    CHECK(waiter_wait(&w, 1, 20000));
    CHECK_RC(w.rc, SR_OK);
    CHECK(w.value >= 5);
    CHECK(!w.on_caller_thread);
    CHECK(strncmp(w.thread_name, "sr-worker-", 10) == 0);
    /* an error reply reaches the callback as an error */
    const char *bad[] = {"HGET", "c:cb", "f"};
    CHECK_RC(sr_client_execute(c, 3, bad, NULL, on_reply, &w), SR_OK);
    CHECK(waiter_wait(&w, 2, 20000));
    CHECK_RC(w.rc, SR_ERR_SERVER);
    /* a NULL callback is refused and nothing is called */
    CHECK_RC(sr_client_execute(c, 3, argv, NULL, NULL, &w), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_close(c), SR_OK);
    CHECK(w.done == 2);
    sr_client_free(c);
    waiter_destroy(&w);
}

/* 1000 concurrent executes from 8 threads. */
typedef struct {
    sr_client_t *client;
    atomic_int ok;
    atomic_int failed;
    atomic_int completed;
    atomic_int refused;
} concurrent_t;

static void on_incr(void *user_data, const sr_reply_t *reply, const sr_error_t *error) {
    concurrent_t *s = user_data;
    int64_t v;
    if (!error && sr_reply_integer(reply, &v) == SR_OK)
        atomic_fetch_add(&s->ok, 1);
    else
        atomic_fetch_add(&s->failed, 1);
    atomic_fetch_add(&s->completed, 1);
}

static void *submit_125(void *arg) {
    concurrent_t *s = arg;
    const char *argv[] = {"INCR", "c:concurrent"};
    for (int i = 0; i < 125; i++)
        if (sr_client_execute(s->client, 2, argv, NULL, on_incr, s) != SR_OK)
            atomic_fetch_add(&s->refused, 1);
    return NULL;
}

static void test_1000_concurrent_executes_from_8_threads(void) {
    concurrent_t s;
    pthread_t threads[8];
    int rc;
    sr_error_t *err = NULL;
    memset(&s, 0, sizeof s);
    s.client = open_client();
    CHECK(s.client != NULL);
    CHECK_RC(sr_client_wait_ready(s.client, NULL, NULL), SR_OK);
    sr_reply_free(RUN(s.client, &rc, &err, "DEL", "c:concurrent"));
    CHECK_RC(rc, SR_OK);
    for (int i = 0; i < 8; i++) CHECK(pthread_create(&threads[i], NULL, submit_125, &s) == 0);
    for (int i = 0; i < 8; i++) pthread_join(threads[i], NULL);
    CHECK(atomic_load(&s.refused) == 0);
    long until = now_ms() + 60000;
    while (atomic_load(&s.completed) < 1000 && now_ms() < until) usleep(10000);
    CHECK(atomic_load(&s.completed) == 1000);
    CHECK(atomic_load(&s.ok) == 1000);
    sr_reply_t *r = RUN(s.client, &rc, &err, "GET", "c:concurrent");
    CHECK_RC(rc, SR_OK);
    CHECK(bytes_eq(r, "1000"));
    sr_reply_free(r);
    CHECK_RC(sr_client_close(s.client), SR_OK);
    sr_client_free(s.client);
}

static void test_use_after_close_and_double_close(void) {
    sr_client_t *c = open_client();
    waiter_t w;
    sr_error_t *err = NULL;
    sr_reply_t *r = NULL;
    sr_topology_t *t = NULL;
    const char *argv[] = {"PING"};
    CHECK(c != NULL);
    waiter_init(&w);
    /* Commands in flight when close is called are completed before close returns. */
    for (int i = 0; i < 50; i++) CHECK_RC(sr_client_execute(c, 1, argv, NULL, on_reply, &w), SR_OK);
    CHECK_RC(sr_client_close(c), SR_OK);
    pthread_mutex_lock(&w.mu);
    int done_at_close = w.done;
    pthread_mutex_unlock(&w.mu);
    CHECK(done_at_close == 50);

    CHECK_RC(sr_client_close(c), SR_ERR_CLOSED);
    CHECK_RC(sr_client_execute(c, 1, argv, NULL, on_reply, &w), SR_ERR_CLOSED);
    CHECK_RC(sr_client_execute_blocking(c, 1, argv, NULL, &r, &err), SR_ERR_CLOSED);
    CHECK(r == NULL && sr_error_get_code(err) == SR_ERR_CLOSED);
    sr_error_free(err);
    CHECK_RC(sr_client_topology(c, &t, NULL), SR_ERR_CLOSED);
    CHECK(t == NULL);
    CHECK_RC(sr_client_wait_ready(c, NULL, NULL), SR_ERR_CLOSED);
    CHECK_RC(sr_client_set_event_callback(c, NULL, NULL), SR_ERR_CLOSED);
    usleep(200000);
    CHECK(w.done == 50); /* nothing after close returned */
    sr_client_free(c);
    waiter_destroy(&w);
}

/* Close from inside a completion callback. */
typedef struct {
    sr_client_t *client;
    waiter_t w;
    int close_rc;
    int blocking_rc;
} closer_t;

static void close_in_callback(void *user_data, const sr_reply_t *reply, const sr_error_t *error) {
    closer_t *s = user_data;
    const char *argv[] = {"PING"};
    sr_reply_t *r = NULL;
    (void)reply;
    (void)error;
    s->blocking_rc = sr_client_execute_blocking(s->client, 1, argv, NULL, &r, NULL);
    s->close_rc = sr_client_close(s->client);
    on_reply(&s->w, NULL, NULL);
}

static void test_close_from_a_completion_callback(void) {
    closer_t s;
    const char *argv[] = {"PING"};
    memset(&s, 0, sizeof s);
    waiter_init(&s.w);
    s.client = open_client();
    CHECK(s.client != NULL);
    CHECK_RC(sr_client_execute(s.client, 1, argv, NULL, close_in_callback, &s), SR_OK);
    CHECK(waiter_wait(&s.w, 1, 20000));
    CHECK_RC(s.blocking_rc, SR_ERR_CONFIG); /* blocking is refused on core threads (the core's check) */
    CHECK_RC(s.close_rc, SR_OK);
    CHECK_RC(sr_client_close(s.client), SR_ERR_CLOSED);
    CHECK_RC(sr_client_execute(s.client, 1, argv, NULL, on_reply, &s.w), SR_ERR_CLOSED);
    sr_client_free(s.client);
    waiter_destroy(&s.w);
}

/* Free from inside a completion callback while other commands are still in flight. */
static void free_in_callback(void *user_data, const sr_reply_t *reply, const sr_error_t *error) {
    closer_t *s = user_data;
    (void)reply;
    (void)error;
    pthread_mutex_lock(&s->w.mu);
    if (s->client) {
        sr_client_free(s->client);
        s->client = NULL;
    }
    s->w.done++;
    pthread_cond_broadcast(&s->w.cv);
    pthread_mutex_unlock(&s->w.mu);
}

static void test_free_from_a_completion_callback(void) {
    closer_t s;
    const char *argv[] = {"PING"};
    memset(&s, 0, sizeof s);
    waiter_init(&s.w);
    s.client = open_client();
    CHECK(s.client != NULL);
    sr_client_t *c = s.client;
    int accepted = 0;
    pthread_mutex_lock(&s.w.mu);
    for (int i = 0; i < 20; i++)
        if (sr_client_execute(c, 1, argv, NULL, free_in_callback, &s) == SR_OK) accepted++;
    pthread_mutex_unlock(&s.w.mu);
    CHECK(accepted == 20);
    CHECK(waiter_wait(&s.w, 20, 20000)); /* every completion still arrives, once */
    CHECK(s.client == NULL);
    usleep(100000);
    CHECK(s.w.done == 20);
    waiter_destroy(&s.w);
}

/* Events across a kill -9 failover, and close from inside an event callback. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int old_port;
    int new_port;
    int primary_changes;
    int events;
    sr_event_t *kept; /* an owned copy of the primary_changed event */
    sr_client_t *self;
    int self_close_rc;
    int reinstall_rc;
} events_t;

static void on_event(void *user_data, const sr_event_t *ev) {
    events_t *s = user_data;
    pthread_mutex_lock(&s->mu);
    s->events++;
    printf("    event %s %s\n", ev->kind_name, ev->json);
    if (ev->kind == SR_EVENT_PRIMARY_CHANGED && ev->address && ev->old_primary) {
        s->primary_changes++;
        s->old_port = ev->old_primary->port;
        s->new_port = ev->address->port;
        if (!s->kept) s->kept = sr_event_clone(ev);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void close_on_event(void *user_data, const sr_event_t *ev) {
    events_t *s = user_data;
    (void)ev;
    pthread_mutex_lock(&s->mu);
    s->events++;
    /* installing a callback from inside the client's own callback is refused, not a deadlock */
    s->reinstall_rc = sr_client_set_event_callback(s->self, close_on_event, s);
    s->self_close_rc = sr_client_close(s->self);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void events_init(events_t *s) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
}

static void test_events_across_a_kill9_failover(void) {
    events_t a, b;
    sr_client_t *ca = open_client(), *cb = open_client();
    sr_topology_t *t = NULL;
    char cmd[64];
    int rc;
    sr_error_t *err = NULL;
    events_init(&a);
    events_init(&b);
    CHECK(ca != NULL && cb != NULL);
    CHECK_RC(sr_client_wait_ready(ca, NULL, NULL), SR_OK);
    b.self = cb;
    CHECK_RC(sr_client_set_event_callback(ca, on_event, &a), SR_OK);
    CHECK_RC(sr_client_set_event_callback(cb, close_on_event, &b), SR_OK);
    int old_port = topo.primary_port;
    snprintf(cmd, sizeof cmd, "kill9 %d", old_port);
    CHECK(topo_cmd(&topo, cmd) == 0);
    printf("    killed primary %d\n", old_port);
    long start = now_ms();
    struct timespec ts;
    deadline_in(&ts, 90000);
    pthread_mutex_lock(&a.mu);
    while (a.primary_changes == 0)
        if (pthread_cond_timedwait(&a.cv, &a.mu, &ts)) break;
    int changes = a.primary_changes, np = a.new_port, op = a.old_port;
    pthread_mutex_unlock(&a.mu);
    CHECK(changes >= 1);
    printf("    primary_changed %d -> %d after %ld ms\n", op, np, now_ms() - start);
    CHECK(op == old_port && np != old_port && np > 0);
    CHECK(a.kept && a.kept->kind == SR_EVENT_PRIMARY_CHANGED && a.kept->address->port == np);
    CHECK(strcmp(a.kept->kind_name, "primary_changed") == 0);
    CHECK(strcmp(a.kept->service, "mymaster") == 0 && a.kept->at > 0);
    CHECK(strstr(a.kept->json, "\"kind\":\"primary_changed\"") != NULL);
    topo.primary_port = np;

    CHECK_RC(sr_client_topology(ca, &t, NULL), SR_OK);
    CHECK(t->primary && t->primary->port == np);
    sr_topology_free(t);
    /* writes work on the new primary */
    sr_reply_t *r = RUN(ca, &rc, &err, "SET", "c:after", "1");
    CHECK_RC(rc, SR_OK);
    sr_reply_free(r);

    /* the self-closing client saw at least one event, closed itself from inside it, and was
       never called again */
    pthread_mutex_lock(&b.mu);
    int b_events = b.events, b_rc = b.self_close_rc, b_reinstall = b.reinstall_rc;
    pthread_mutex_unlock(&b.mu);
    CHECK(b_events == 1);
    CHECK_RC(b_reinstall, SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(b_rc, SR_OK);
    CHECK_RC(sr_client_close(cb), SR_ERR_CLOSED);
    sr_client_free(cb);

    /* after set_event_callback(NULL) returns, the callback is not called again */
    CHECK_RC(sr_client_set_event_callback(ca, NULL, NULL), SR_OK);
    pthread_mutex_lock(&a.mu);
    int seen = a.events;
    pthread_mutex_unlock(&a.mu);
    CHECK_RC(sr_client_close(ca), SR_OK);
    CHECK(a.events == seen);
    sr_client_free(ca);
    sr_event_free(a.kept);
}

/* close racing with a kill -9 failover: several clients with commands in flight are closed one
 * after another while the sentinels fail over; each close returns only after every one of its
 * completions ran, exactly once, and none runs after. */
#define RACERS 4
#define RACER_COMMANDS 200

static void test_close_racing_with_a_kill9_failover(void) {
    sr_client_t *c[RACERS];
    inflight_t s[RACERS];
    char cmd[64], key[32];
    for (int i = 0; i < RACERS; i++) {
        memset(&s[i], 0, sizeof s[i]);
        c[i] = open_client();
        CHECK(c[i] != NULL);
        CHECK_RC(sr_client_wait_ready(c[i], NULL, NULL), SR_OK);
    }
    snprintf(cmd, sizeof cmd, "kill9 %d", topo.primary_port);
    CHECK(topo_cmd(&topo, cmd) == 0);
    for (int i = 0; i < RACERS; i++) {
        const char *argv[] = {"INCR", key};
        snprintf(key, sizeof key, "c:race:%d", i);
        for (int j = 0; j < RACER_COMMANDS; j++) {
            CHECK_RC(sr_client_execute(c[i], 2, argv, NULL, on_inflight, &s[i]), SR_OK);
        }
        usleep(250000 * (useconds_t)i); /* closes spread over the failover */
        CHECK_RC(sr_client_close(c[i]), SR_OK);
        atomic_store(&s[i].close_returned, 1);
        CHECK(atomic_load(&s[i].completed) == RACER_COMMANDS);
    }
    usleep(100000);
    for (int i = 0; i < RACERS; i++) {
        CHECK(atomic_load(&s[i].completed) == RACER_COMMANDS); /* exactly once */
        CHECK(atomic_load(&s[i].after_close) == 0);
        sr_client_free(c[i]);
    }
}

int main(int argc, char **argv) {
    static const test_t offline[] = {
        {"version_and_error_texts", test_version_and_error_texts},
        {"bad_urls_and_options", test_bad_urls_and_options},
        {"null_arguments", test_null_arguments},
        {"close_with_2000_commands_in_flight", test_close_with_2000_commands_in_flight},
        {"a_panic_is_internal", test_a_panic_is_internal},
    };
    static const test_t live[] = {
        {"open_ready_and_topology", test_open_ready_and_topology},
        {"execute_blocking_and_reply_types", test_execute_blocking_and_reply_types},
        {"execute_with_callback", test_execute_with_callback},
        {"1000_concurrent_executes_from_8_threads", test_1000_concurrent_executes_from_8_threads},
        {"use_after_close_and_double_close", test_use_after_close_and_double_close},
        {"close_from_a_completion_callback", test_close_from_a_completion_callback},
        {"free_from_a_completion_callback", test_free_from_a_completion_callback},
        {"events_across_a_kill9_failover", test_events_across_a_kill9_failover},
        {"close_racing_with_a_kill9_failover", test_close_racing_with_a_kill9_failover},
    };
    /* Before any client: the runtime's worker count can be chosen. */
    if (sr_runtime_set_worker_threads(2, NULL) != SR_OK) {
        fprintf(stderr, "sr_runtime_set_worker_threads failed\n");
        return 1;
    }
    int rc = RUN_SUITE(argc, argv, &topo, offline, live);
    /* Stop the core's threads so leak checkers see a quiet process. */
    sr_runtime_shutdown(5000);
    return rc;
}
