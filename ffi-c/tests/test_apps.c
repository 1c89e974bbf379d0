/* What applications use, through the C ABI, against a real Redis + Sentinel topology: pipelines
 * (callback and blocking), per-call deadlines, cancel handles, transactions with WATCH (including
 * the EXEC refused after a failover), error hints naming the C API, and the log callback (no
 * secret in any line). Transactions in callback and blocking forms.
 *
 * Usage: test_apps /path/to/sr-topology
 * Prints one line per test and a closing "N passed, N failed"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sentinel_recovery.h"
#include "check.h"
#include "topology.h"

static topo_t topo;
static sr_client_t *client;

/* One completion, waited for on a condition variable (bounded). What a test needs of the result
 * is copied in the callback: code, message, an integer or a string reply, results' summary. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int calls;
    int code; /* SR_OK or the error's code */
    char message[512];
    int reply_type;
    int64_t integer;
    char text[128];
    int results_null; /* results NULL (with error NULL: a watched key changed) */
    size_t results_len;
    int result_codes[8];   /* per command: SR_OK or its error code */
    int64_t result_ints[8];
    sr_transaction_t *tx;
} waiter_t;

static void waiter_init(waiter_t *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
}

static void waiter_destroy(waiter_t *w) {
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

static void finish(waiter_t *w) {
    w->done = 1;
    w->calls++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void take_error(waiter_t *w, const sr_error_t *e) {
    w->code = sr_error_get_code(e);
    snprintf(w->message, sizeof w->message, "%s", sr_error_get_message(e));
}

static void on_reply(void *ud, const sr_reply_t *reply, const sr_error_t *error) {
    waiter_t *w = ud;
    pthread_mutex_lock(&w->mu);
    if (error) {
        take_error(w, error);
    } else {
        w->code = SR_OK;
        w->reply_type = sr_reply_type(reply);
        sr_reply_integer(reply, &w->integer);
        const uint8_t *bytes = NULL;
        size_t len = 0;
        if (sr_reply_bytes(reply, &bytes, &len) == SR_OK && len < sizeof w->text) {
            memcpy(w->text, bytes, len);
            w->text[len] = '\0';
        }
    }
    finish(w);
}

static void on_results(void *ud, const sr_results_t *results, const sr_error_t *error) {
    waiter_t *w = ud;
    pthread_mutex_lock(&w->mu);
    if (error) {
        take_error(w, error);
    } else {
        w->code = SR_OK;
        w->results_null = results == NULL;
        w->results_len = sr_results_len(results);
        for (size_t i = 0; i < w->results_len && i < 8; i++) {
            const sr_error_t *e = sr_results_error(results, i);
            w->result_codes[i] = e ? sr_error_get_code(e) : SR_OK;
            if (!e) sr_reply_integer(sr_results_reply(results, i), &w->result_ints[i]);
        }
    }
    finish(w);
}

static void on_transaction(void *ud, sr_transaction_t *tx, const sr_error_t *error) {
    waiter_t *w = ud;
    pthread_mutex_lock(&w->mu);
    if (error) {
        take_error(w, error);
    } else {
        w->code = SR_OK;
        w->tx = tx;
    }
    finish(w);
}

/* Waits up to 30 s for the completion; 0 when it came. */
static int wait_for(waiter_t *w) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 30;
    pthread_mutex_lock(&w->mu);
    while (!w->done) {
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) != 0) break;
    }
    int done = w->done;
    pthread_mutex_unlock(&w->mu);
    return done ? 0 : -1;
}

#define CMD(...) {sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *), (const char *[]){__VA_ARGS__}, NULL}

static void test_pipeline_gives_every_reply_or_error_in_order(void) {
    sr_command_t cmds[] = {CMD("SET", "c:p", "1"), CMD("INCR", "c:p"), CMD("HGET", "c:p", "f"),
                           CMD("INCR", "c:p")};
    waiter_t w;
    waiter_init(&w);
    CHECK_RC(sr_client_pipeline(client, cmds, 4, NULL, on_results, &w), SR_OK);
    CHECK(wait_for(&w) == 0);
    CHECK_RC(w.code, SR_OK);
    CHECK(w.results_len == 4);
    CHECK(w.result_codes[0] == SR_OK && w.result_codes[1] == SR_OK);
    CHECK(w.result_ints[1] == 2);
    CHECK(w.result_codes[2] == SR_ERR_SERVER);
    CHECK(w.result_codes[3] == SR_OK && w.result_ints[3] == 3);
    waiter_destroy(&w);

    sr_results_t *results = NULL;
    sr_error_t *error = NULL;
    CHECK_RC(sr_client_pipeline_blocking(client, cmds, 4, NULL, &results, &error), SR_OK);
    CHECK(sr_results_len(results) == 4);
    const sr_error_t *wrongtype = sr_results_error(results, 2);
    CHECK(wrongtype && strcmp(sr_error_get_server_code(wrongtype), "WRONGTYPE") == 0);
    CHECK(sr_results_reply(results, 2) == NULL && sr_results_reply(results, 9) == NULL);
    int64_t n = 0;
    CHECK_RC(sr_reply_integer(sr_results_reply(results, 3), &n), SR_OK);
    CHECK(n == 3);
    sr_results_free(results);

    /* A command a pipeline can't carry fails the whole pipeline, nothing sent. */
    sr_command_t bad[] = {CMD("INCR", "c:p"), CMD("BLPOP", "c:list", "1")};
    CHECK_RC(sr_client_pipeline_blocking(client, bad, 2, NULL, &results, &error), SR_ERR_CONFIG);
    CHECK(results == NULL);
    sr_error_free(error);
    /* Nothing was sent: the INCR did not run (3, as the second pipeline left it). */
    sr_reply_t *reply = NULL;
    const char *get[] = {"GET", "c:p"};
    CHECK_RC(sr_client_execute_blocking(client, 2, get, NULL, &reply, NULL), SR_OK);
    const uint8_t *bytes;
    size_t len;
    CHECK_RC(sr_reply_bytes(reply, &bytes, &len), SR_OK);
    CHECK(len == 1 && bytes[0] == '3');
    sr_reply_free(reply);
}

/* A command held by CLIENT PAUSE WRITE misses a short per-call deadline. (A blocking command's own
 * timeout is added to its deadline: BLPOP 0 never times out.) Each pause stays short of the
 * sentinels' down-after (1000 ms): their PUBLISH waits behind it too. */
static void test_a_per_call_deadline_replaces_the_clients(void) {
    const char *pause[] = {"CLIENT", "PAUSE", "500", "WRITE"};
    const char *get[] = {"SET", "c:paused", "1"};
    sr_call_options_t opts = {.timeout_ms = 100, .operation = NULL};
    sr_reply_t *reply = NULL;
    sr_error_t *error = NULL;
    CHECK_RC(sr_client_execute_blocking(client, 4, pause, NULL, &reply, NULL), SR_OK);
    sr_reply_free(reply);
    reply = NULL;
    CHECK_RC(sr_client_execute_blocking_with(client, 3, get, NULL, &opts, &reply, &error),
             SR_ERR_TIMEOUT);
    CHECK(reply == NULL);
    sr_error_free(error);

    CHECK_RC(sr_client_execute_blocking(client, 4, pause, NULL, &reply, NULL), SR_OK);
    sr_reply_free(reply);
    reply = NULL;
    waiter_t w;
    waiter_init(&w);
    CHECK_RC(sr_client_execute_with(client, 3, get, NULL, &opts, on_reply, &w), SR_OK);
    CHECK(wait_for(&w) == 0);
    CHECK_RC(w.code, SR_ERR_TIMEOUT);
    waiter_destroy(&w);

    /* A pipeline's deadline covers the whole pipeline: a SET behind a CLIENT PAUSE WRITE misses it. */
    sr_command_t cmds[] = {CMD("CLIENT", "PAUSE", "500", "WRITE"), CMD("SET", "c:paused", "2")};
    sr_results_t *results = NULL;
    CHECK_RC(sr_client_pipeline_blocking(client, cmds, 2, &opts, &results, &error),
             SR_ERR_TIMEOUT);
    sr_error_free(error);
    const char *unpause[] = {"CLIENT", "UNPAUSE"};
    sr_call_options_t long_opts = {.timeout_ms = 20000, .operation = NULL};
    CHECK_RC(sr_client_execute_blocking_with(client, 2, unpause, NULL, &long_opts, &reply, NULL),
             SR_OK);
    sr_reply_free(reply);
}

/* Clients of the primary blocked in BLPOP now (-1 when CLIENT LIST failed). */
static int blocked_in_blpop(void) {
    const char *list[] = {"CLIENT", "LIST"};
    sr_reply_t *reply = NULL;
    if (sr_client_execute_blocking(client, 2, list, NULL, &reply, NULL) != SR_OK) return -1;
    const uint8_t *bytes = NULL;
    size_t len = 0;
    int n = 0;
    if (sr_reply_bytes(reply, &bytes, &len) == SR_OK) {
        char *text = malloc(len + 1);
        if (text) {
            memcpy(text, bytes, len);
            text[len] = '\0';
            for (char *p = text; (p = strstr(p, "cmd=blpop")) != NULL; p++) n++;
            free(text);
        }
    }
    sr_reply_free(reply);
    return n;
}

static void test_a_cancelled_call_says_so_once_and_is_not_retried(void) {
    const char *blpop[] = {"BLPOP", "c:nothing", "0"};
    sr_operation_t *op = NULL;
    sr_call_options_t opts = {.timeout_ms = 0, .operation = &op};
    waiter_t w;
    waiter_init(&w);
    CHECK_RC(sr_client_execute_with(client, 3, blpop, NULL, &opts, on_reply, &w), SR_OK);
    CHECK(op != NULL);
    /* Sent and running on the server before it is cancelled. */
    int on_server = 0;
    for (int i = 0; i < 500 && !on_server; i++) {
        on_server = blocked_in_blpop() == 1;
        if (!on_server) usleep(20 * 1000);
    }
    CHECK(on_server);
    sr_operation_cancel(op);
    CHECK(wait_for(&w) == 0);
    CHECK_RC(w.code, SR_ERR_CLOSED);
    CHECK(strstr(w.message, "cancelled by the caller") && strstr(w.message, "never retried"));
    /* Cancelling again, after the completion, does nothing. */
    sr_operation_cancel(op);
    sr_operation_free(op);
    /* Its connection closes: the server no longer runs it, and it is not retried behind our back,
     * so the value pushed now stays in the list. */
    int gone = 0;
    for (int i = 0; i < 500 && !gone; i++) {
        gone = blocked_in_blpop() == 0;
        if (!gone) usleep(20 * 1000);
    }
    CHECK(gone);
    sr_reply_t *reply = NULL;
    const char *push[] = {"LPUSH", "c:nothing", "x"};
    CHECK_RC(sr_client_execute_blocking(client, 3, push, NULL, &reply, NULL), SR_OK);
    int64_t n = 0;
    sr_reply_integer(reply, &n);
    sr_reply_free(reply);
    CHECK(n == 1);
    const char *llen[] = {"LLEN", "c:nothing"};
    CHECK_RC(sr_client_execute_blocking(client, 2, llen, NULL, &reply, NULL), SR_OK);
    sr_reply_integer(reply, &n);
    sr_reply_free(reply);
    CHECK(n == 1);
    pthread_mutex_lock(&w.mu);
    int calls = w.calls;
    pthread_mutex_unlock(&w.mu);
    CHECK(calls == 1);
    waiter_destroy(&w);
    /* A refused call gives no handle. */
    op = (sr_operation_t *)&opts;
    CHECK_RC(sr_client_execute_with(client, 0, blpop, NULL, &opts, on_reply, &w),
             SR_ERR_INVALID_ARGUMENT);
    CHECK(op == NULL);
}

static void test_hints_name_the_c_api(void) {
    const char *multi[] = {"MULTI"};
    sr_reply_t *reply = NULL;
    sr_error_t *error = NULL;
    CHECK_RC(sr_client_execute_blocking(client, 1, multi, NULL, &reply, &error), SR_ERR_CONFIG);
    const char *m = sr_error_get_message(error);
    int ok = strstr(m, "sr_client_transaction()") != NULL && strstr(m, "Client::") == NULL;
    if (!ok) fprintf(stderr, "    message: %s\n", m);
    sr_error_free(error);
    CHECK(ok);
}

static sr_transaction_t *begin(void) {
    waiter_t w;
    waiter_init(&w);
    if (sr_client_transaction_begin(client, NULL, on_transaction, &w) != SR_OK || wait_for(&w))
        return NULL;
    if (w.code != SR_OK) fprintf(stderr, "    begin: %s\n", w.message);
    waiter_destroy(&w);
    return w.tx;
}

static int watch(sr_transaction_t *tx, const char *key) {
    waiter_t w;
    waiter_init(&w);
    const char *keys[] = {key};
    if (sr_transaction_watch(tx, 1, keys, NULL, on_reply, &w) != SR_OK || wait_for(&w)) return -1;
    waiter_destroy(&w);
    return w.code;
}

static void test_transactions_with_watch(void) {
    sr_transaction_t *tx = begin();
    CHECK(tx != NULL);
    CHECK_RC(watch(tx, "c:tx"), SR_OK);
    waiter_t w;
    waiter_init(&w);
    const char *get[] = {"GET", "c:tx"};
    CHECK_RC(sr_transaction_execute(tx, 2, get, NULL, on_reply, &w), SR_OK);
    CHECK(wait_for(&w) == 0);
    CHECK_RC(w.code, SR_OK);
    CHECK(w.reply_type == SR_REPLY_NIL);
    waiter_destroy(&w);
    sr_command_t cmds[] = {CMD("INCR", "c:tx"), CMD("INCR", "c:tx")};
    waiter_init(&w);
    CHECK_RC(sr_transaction_exec(tx, cmds, 2, on_results, &w), SR_OK);
    CHECK(wait_for(&w) == 0);
    CHECK_RC(w.code, SR_OK);
    CHECK(w.results_len == 2 && w.result_ints[0] == 1 && w.result_ints[1] == 2);
    waiter_destroy(&w);
    /* Ended: a second EXEC is refused. */
    waiter_init(&w);
    CHECK_RC(sr_transaction_exec(tx, cmds, 1, on_results, &w), SR_OK);
    CHECK(wait_for(&w) == 0);
    CHECK_RC(w.code, SR_ERR_CONFIG);
    waiter_destroy(&w);
    sr_transaction_free(tx);

    /* A watched key changed by another client: results and error both NULL, nothing ran. */
    tx = begin();
    CHECK(tx != NULL);
    CHECK_RC(watch(tx, "c:tx"), SR_OK);
    const char *set[] = {"SET", "c:tx", "100"};
    sr_reply_t *reply = NULL;
    CHECK_RC(sr_client_execute_blocking(client, 3, set, NULL, &reply, NULL), SR_OK);
    sr_reply_free(reply);
    waiter_init(&w);
    CHECK_RC(sr_transaction_exec(tx, cmds, 1, on_results, &w), SR_OK);
    CHECK(wait_for(&w) == 0);
    CHECK_RC(w.code, SR_OK);
    CHECK(w.results_null);
    waiter_destroy(&w);
    sr_transaction_free(tx);

    /* Freed without EXEC: discarded. */
    tx = begin();
    CHECK(tx != NULL);
    sr_transaction_free(tx);
}

/* The composite transaction: WATCH and the commands in one call, one result per command; a
 * NULL callback or NULL watch keys are refused before anything starts. */
static void test_a_transaction_in_one_call(void) {
    const char *keys[] = {"c:one"};
    const char *del[] = {"DEL", "c:one"};
    sr_reply_t *reply = NULL;
    CHECK_RC(sr_client_execute_blocking(client, 2, del, NULL, &reply, NULL), SR_OK);
    sr_reply_free(reply);
    sr_command_t cmds[] = {CMD("INCR", "c:one"), CMD("INCRBY", "c:one", "10")};
    waiter_t w;
    waiter_init(&w);
    CHECK_RC(sr_client_transaction(client, cmds, 2, 1, keys, NULL, NULL, NULL, &w), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_transaction(client, cmds, 2, 1, NULL, NULL, NULL, on_results, &w), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_transaction(client, cmds, 2, 1, keys, NULL, NULL, on_results, &w), SR_OK);
    CHECK(wait_for(&w) == 0);
    CHECK_RC(w.code, SR_OK);
    CHECK(w.calls == 1 && w.results_len == 2 && w.result_ints[0] == 1 && w.result_ints[1] == 11);
    waiter_destroy(&w);
}

static void test_blocking_transactions(void) {
    sr_transaction_t *tx = NULL;
    sr_error_t *error = NULL;
    CHECK_RC(sr_client_transaction_begin_blocking(client, &tx, &error), SR_OK);
    const char *keys[] = {"c:btx"};
    CHECK_RC(sr_transaction_watch_blocking(tx, 1, keys, NULL, &error), SR_OK);
    const char *get[] = {"GET", "c:btx"};
    sr_reply_t *reply = NULL;
    CHECK_RC(sr_transaction_execute_blocking(tx, 2, get, NULL, &reply, &error), SR_OK);
    CHECK(sr_reply_type(reply) == SR_REPLY_NIL);
    sr_reply_free(reply);
    sr_command_t cmds[] = {CMD("INCR", "c:btx"), CMD("INCR", "c:btx")};
    sr_results_t *results = NULL;
    CHECK_RC(sr_transaction_exec_blocking(tx, cmds, 2, &results, &error), SR_OK);
    CHECK(sr_results_len(results) == 2);
    int64_t n = 0;
    CHECK_RC(sr_reply_integer(sr_results_reply(results, 1), &n), SR_OK);
    CHECK(n == 2);
    sr_results_free(results);
    sr_transaction_free(tx);

    /* A watched key changed: SR_OK and no results. */
    CHECK_RC(sr_client_transaction_begin_blocking(client, &tx, &error), SR_OK);
    CHECK_RC(sr_transaction_watch_blocking(tx, 1, keys, NULL, &error), SR_OK);
    const char *set[] = {"SET", "c:btx", "7"};
    CHECK_RC(sr_client_execute_blocking(client, 3, set, NULL, &reply, NULL), SR_OK);
    sr_reply_free(reply);
    results = (sr_results_t *)&n;
    CHECK_RC(sr_transaction_exec_blocking(tx, cmds, 1, &results, &error), SR_OK);
    CHECK(results == NULL);
    /* Ended: further steps are refused. */
    CHECK_RC(sr_transaction_watch_blocking(tx, 1, keys, NULL, &error), SR_ERR_CONFIG);
    sr_error_free(error);
    sr_transaction_free(tx);
    CHECK_RC(sr_client_transaction_begin_blocking(client, NULL, NULL), SR_ERR_INVALID_ARGUMENT);
}

static void test_exec_is_refused_after_a_failover(void) {
    sr_transaction_t *tx = begin();
    CHECK(tx != NULL);
    CHECK_RC(watch(tx, "c:tx"), SR_OK);
    char cmd[64];
    int old = topo.primary_port;
    CHECK(topo_cmd(&topo, "failover") == 0);
    snprintf(cmd, sizeof cmd, "wait-primary-not %d 40000", old);
    CHECK(topo_cmd(&topo, cmd) == 0);
    topo.primary_port = (int)topo_json_int(topo.line, NULL, "port");
    /* Wait until the client itself follows (its topology names the new primary). */
    int followed = 0;
    for (int i = 0; i < 400 && !followed; i++) {
        sr_topology_t *t = NULL;
        if (sr_client_topology(client, &t, NULL) == SR_OK && t->primary &&
            t->primary->port == topo.primary_port)
            followed = 1;
        sr_topology_free(t);
        if (!followed) usleep(100 * 1000);
    }
    CHECK(followed);
    sr_command_t cmds[] = {CMD("INCR", "c:tx")};
    waiter_t w;
    waiter_init(&w);
    CHECK_RC(sr_transaction_exec(tx, cmds, 1, on_results, &w), SR_OK);
    CHECK(wait_for(&w) == 0);
    CHECK_RC(w.code, SR_ERR_CONNECTION_LOST);
    CHECK(strstr(w.message, "nothing was applied"));
    waiter_destroy(&w);
    sr_transaction_free(tx);
    /* The INCR never ran anywhere. */
    sr_reply_t *reply = NULL;
    const char *get[] = {"GET", "c:tx"};
    sr_call_options_t opts = {.timeout_ms = 20000, .operation = NULL};
    CHECK_RC(sr_client_execute_blocking_with(client, 2, get, NULL, &opts, &reply, NULL), SR_OK);
    const uint8_t *bytes;
    size_t len;
    CHECK_RC(sr_reply_bytes(reply, &bytes, &len), SR_OK);
    CHECK(len == 3 && memcmp(bytes, "100", 3) == 0);
    sr_reply_free(reply);
}

/* Log lines, copied by the callback. */
static struct {
    pthread_mutex_t mu;
    int lines;
    int warnings;
    int bad_level;
    int bad_target;
    int secrets;
} logs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void on_log(void *ud, int level, const char *target, const char *message) {
    (void)ud;
    pthread_mutex_lock(&logs.mu);
    logs.lines++;
    if (level >= SR_LOG_WARN) logs.warnings++;
    if (level != SR_LOG_TRACE && level != SR_LOG_DEBUG && level != SR_LOG_INFO &&
        level != SR_LOG_WARN && level != SR_LOG_ERROR)
        logs.bad_level++;
    if (strncmp(target, "sentinel_recovery", 17) != 0) logs.bad_target++;
    if (strstr(message, "Secret-4")) logs.secrets++;
    pthread_mutex_unlock(&logs.mu);
}

static void test_log_lines_reach_the_callback_without_secrets(void) {
    CHECK_RC(sr_set_log_callback(on_log, NULL, SR_LOG_TRACE), SR_OK);
    /* Nothing listens on port 1: the sentinel is unreachable, which is worth a warning. */
    sr_client_t *c = NULL;
    sr_option_t opt = {"connect_timeout_ms", "200"};
    CHECK_RC(sr_client_open("redis+sentinel://app:pw-Secret-42@127.0.0.1:1/svc"
                            "?sentinel_password=sent-Secret-43",
                            &opt, 1, &c, NULL),
             SR_OK);
    int warned = 0;
    for (int i = 0; i < 300 && !warned; i++) {
        pthread_mutex_lock(&logs.mu);
        warned = logs.warnings > 0;
        pthread_mutex_unlock(&logs.mu);
        if (!warned) usleep(100 * 1000);
    }
    sr_client_free(c);
    CHECK_RC(sr_set_log_callback(NULL, NULL, 0), SR_OK);
    pthread_mutex_lock(&logs.mu);
    int lines = logs.lines, bad = logs.bad_level + logs.bad_target, secrets = logs.secrets;
    pthread_mutex_unlock(&logs.mu);
    CHECK(warned);
    CHECK(lines > 0 && bad == 0);
    CHECK(secrets == 0);
    /* Removed: the client's work below logs nothing here. */
    const char *ping[] = {"PING"};
    sr_reply_t *reply = NULL;
    CHECK_RC(sr_client_execute_blocking(client, 1, ping, NULL, &reply, NULL), SR_OK);
    sr_reply_free(reply);
    pthread_mutex_lock(&logs.mu);
    int after = logs.lines;
    pthread_mutex_unlock(&logs.mu);
    CHECK(after == lines);
}

#define RUN(t)                                                                         \
    do {                                                                               \
        long start_ = now_ms();                                                        \
        failures_in_test = 0;                                                          \
        t();                                                                           \
        printf("%s %s (%ld ms)\n", failures_in_test ? "FAIL" : "ok  ", #t + 5,         \
               now_ms() - start_);                                                     \
        failures_in_test ? failed++ : passed++;                                        \
    } while (0)

int main(int argc, char **argv) {
    int passed = 0, failed = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: %s /path/to/sr-topology\n", argv[0]);
        return 2;
    }
    if (topo_start(&topo, argv[1]) != 0) {
        fprintf(stderr, "could not start the topology\n");
        topo_stop(&topo);
        return 1;
    }
    printf("topology up: %s\n", topo.url);
    sr_option_t opt = {"command_timeout_ms", "10000"};
    sr_error_t *error = NULL;
    if (sr_client_open(topo.url, &opt, 1, &client, &error) != SR_OK ||
        sr_client_wait_ready(client, NULL, &error) != SR_OK) {
        fprintf(stderr, "could not open the client: %s\n", sr_error_get_message(error));
        topo_stop(&topo);
        return 1;
    }
    RUN(test_pipeline_gives_every_reply_or_error_in_order);
    RUN(test_a_per_call_deadline_replaces_the_clients);
    RUN(test_a_cancelled_call_says_so_once_and_is_not_retried);
    RUN(test_hints_name_the_c_api);
    RUN(test_transactions_with_watch);
    RUN(test_a_transaction_in_one_call);
    RUN(test_blocking_transactions);
    RUN(test_log_lines_reach_the_callback_without_secrets);
    RUN(test_exec_is_refused_after_a_failover);
    sr_client_free(client);
    topo_stop(&topo);
    sr_runtime_shutdown(5000);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
