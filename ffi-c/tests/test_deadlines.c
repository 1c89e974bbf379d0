/* Every completion arrives by its deadline (issue 10), through the C ABI: sr_client_execute with
 * callbacks keeps 16 INCRs in flight on the first of 2 clients of one URL (the second sends a PING
 * every 500 ms), and the primary is killed with kill -9 meanwhile. Each completion's time is
 * measured in the callback against the time its command was issued; one later than
 * command_timeout_ms + a slack, or one that never comes, fails the test, which lists them.
 *
 * A successful INCR's callback issues the next one at once (sr_client_execute may be called from a
 * completion callback), so 16 stay in flight; after an error a driver thread issues it after a
 * 10 ms back-off, and sends the PINGs. Every wait is on a state (condition variable), bounded; no
 * fixed sleep decides an outcome. Short on purpose (3 s deadline): run.sh also runs it under
 * valgrind and ASan.
 *
 * SIGPIPE: the library writes commands with writev(2), which has no MSG_NOSIGNAL; a write to the
 * connection of the killed primary would raise SIGPIPE in the host process, whose default action
 * kills a C program (1 run in 3 here before the library blocked SIGPIPE on its own threads).
 * This test counts SIGPIPEs with a handler and fails if the library raised any
 * (-DSR_FAIL_ON_SIGPIPE=0 only counts them).
 *
 * Usage: test_deadlines /path/to/sr-topology
 * Prints one line per test and a closing "N passed, N failed"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sentinel_recovery.h"
#include "topology.h"

/* -D overrides only for checking that the test can fail (e.g. -DSLACK_MS=-2900). */
#ifndef DEADLINE_MS
#define DEADLINE_MS 3000 /* command_timeout_ms of both clients */
#endif
#ifndef SLACK_MS
#define SLACK_MS 2000 /* what a completion may take beyond it (a busy 2-core machine) */
#endif
#define IN_FLIGHT 16     /* INCRs always in flight on the first client */
#define PING_EVERY_MS 500
#define FAILOVER_MS 40000
#define MAX_CODES 64
#ifndef SR_FAIL_ON_SIGPIPE
#define SR_FAIL_ON_SIGPIPE 1
#endif

static atomic_long sigpipes;

static void on_sigpipe(int sig) {
    (void)sig;
    atomic_fetch_add(&sigpipes, 1);
}

typedef struct {
    double start; /* ms, CLOCK_MONOTONIC */
    double end;   /* < 0 while pending */
    int rc;       /* SR_OK or the error code */
    int client;   /* 0: INCR on the first client, 1: PING on the second */
} op_t;

/* The ledger: every command issued, guarded by mu; cv is broadcast on every change. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    op_t *ops;
    size_t len, cap;
    size_t pending;
    int incr_in_flight;
    int ping_pending;
    int errors_since_issue;
    long acked;
    long errors[MAX_CODES];
    long twice;
    long unexpected;
    int stop;
    int old_port;
    int switched;
    int out_of_memory;
    sr_client_t *clients[2];
} L = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static topo_t topo;
static int failures_in_test;

#define FAIL(...)                                                \
    do {                                                         \
        fprintf(stderr, "    %s:%d: ", __FILE__, __LINE__);      \
        fprintf(stderr, __VA_ARGS__);                            \
        fputc('\n', stderr);                                     \
        failures_in_test++;                                      \
    } while (0)

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static void deadline_in(struct timespec *ts, long ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Records a command about to be issued; returns its index (SIZE_MAX when out of memory).
 * `slot_kept`: an INCR reissued by a callback, whose in-flight slot op_end kept. */
static size_t op_start(int client, int slot_kept) {
    size_t idx = SIZE_MAX;
    pthread_mutex_lock(&L.mu);
    if (L.len == L.cap) {
        size_t cap = L.cap ? L.cap * 2 : 4096;
        op_t *ops = realloc(L.ops, cap * sizeof *ops);
        if (!ops) {
            L.out_of_memory = 1;
            if (slot_kept) L.incr_in_flight--;
            pthread_mutex_unlock(&L.mu);
            return idx;
        }
        L.ops = ops;
        L.cap = cap;
    }
    idx = L.len++;
    L.ops[idx].start = now_ms();
    L.ops[idx].end = -1;
    L.ops[idx].rc = -1;
    L.ops[idx].client = client;
    L.pending++;
    if (client != 0)
        L.ping_pending = 1;
    else if (!slot_kept)
        L.incr_in_flight++;
    pthread_mutex_unlock(&L.mu);
    return idx;
}

/* Records the completion of command `idx` with `rc`, timed now. Returns 1 when the caller is to
 * issue the next INCR at once (a success before stop: its in-flight slot is kept for it). */
static int op_end(size_t idx, int rc) {
    double end = now_ms();
    int reissue = 0;
    pthread_mutex_lock(&L.mu);
    op_t *o = &L.ops[idx];
    if (o->end >= 0) {
        L.twice++;
    } else {
        o->end = end;
        o->rc = rc;
        L.pending--;
        reissue = o->client == 0 && rc == SR_OK && !L.stop;
        if (o->client != 0)
            L.ping_pending = 0;
        else if (!reissue)
            L.incr_in_flight--;
        if (rc == SR_OK) {
            L.acked++;
        } else {
            L.errors[rc >= 0 && rc < MAX_CODES ? rc : 0]++;
            L.errors_since_issue++;
            if (rc != SR_ERR_TIMEOUT && rc != SR_ERR_CONNECTION_LOST) L.unexpected++;
        }
    }
    pthread_cond_broadcast(&L.cv);
    pthread_mutex_unlock(&L.mu);
    return reissue;
}

static void issue(int client, int slot_kept);

/* Completion callback, on a core thread: records, and after a successful INCR issues the next. */
static void on_done(void *user_data, const sr_reply_t *reply, const sr_error_t *error) {
    (void)reply;
    if (op_end((size_t)(uintptr_t)user_data, error ? sr_error_get_code(error) : SR_OK)) issue(0, 1);
}

static void on_event(void *user_data, const sr_event_t *ev) {
    (void)user_data;
    if (ev->kind != SR_EVENT_PRIMARY_CHANGED || !ev->old_primary) return;
    pthread_mutex_lock(&L.mu);
    if (ev->old_primary->port == L.old_port) L.switched = 1;
    pthread_cond_broadcast(&L.cv);
    pthread_mutex_unlock(&L.mu);
}

/* Issues one command on client 0 (INCR) or 1 (PING). A refused command completes at once. */
static void issue(int client, int slot_kept) {
    const char *incr[] = {"INCR", "c:deadlines"};
    const char *ping[] = {"PING"};
    size_t idx = op_start(client, slot_kept);
    if (idx == SIZE_MAX) return;
    int rc = client == 0
                 ? sr_client_execute(L.clients[0], 2, incr, NULL, on_done, (void *)(uintptr_t)idx)
                 : sr_client_execute(L.clients[1], 1, ping, NULL, on_done, (void *)(uintptr_t)idx);
    if (rc != SR_OK) op_end(idx, rc);
}

/* Fills the first client's free INCR slots (those freed by errors: after a 10 ms back-off, as
 * applications do) and sends a PING every PING_EVERY_MS on the second, until L.stop. */
static void *driver(void *arg) {
    double next_ping = now_ms();
    (void)arg;
    pthread_mutex_lock(&L.mu);
    while (!L.stop) {
        int backoff = L.errors_since_issue > 0;
        int need = IN_FLIGHT - L.incr_in_flight;
        int ping = !L.ping_pending && now_ms() >= next_ping;
        L.errors_since_issue = 0;
        pthread_mutex_unlock(&L.mu);
        if (backoff) usleep(10000);
        for (int i = 0; i < need; i++) issue(0, 0);
        if (ping) {
            next_ping = now_ms() + PING_EVERY_MS;
            issue(1, 0);
        }
        pthread_mutex_lock(&L.mu);
        if (!L.stop && L.incr_in_flight >= IN_FLIGHT && L.errors_since_issue == 0) {
            struct timespec ts;
            deadline_in(&ts, 20); /* also the PING's clock */
            pthread_cond_timedwait(&L.cv, &L.mu, &ts);
        }
    }
    pthread_mutex_unlock(&L.mu);
    return NULL;
}

/* With L.mu held: whether a command is past deadline + slack (pending, or completed late). */
static int any_late_locked(void) {
    double now = now_ms();
    for (size_t i = 0; i < L.len; i++) {
        double end = L.ops[i].end < 0 ? now : L.ops[i].end;
        if (end - L.ops[i].start > DEADLINE_MS + SLACK_MS) return 1;
    }
    return 0;
}

/* The states waited for (predicates called with L.mu held). */
static long acked_target;
static double settle_by;
static int writes_before_kill(void) { return L.acked > 200; }
static int switched(void) { return L.switched; }
static int writes_after_switch(void) { return L.acked > acked_target || any_late_locked(); }
static int settled(void) { return L.pending == 0 || now_ms() > settle_by; }

/* Waits until `state()` holds, at most timeout_ms; 1 if it does. */
static int wait_state(int (*state)(void), long timeout_ms) {
    double until = now_ms() + (double)timeout_ms;
    int ok;
    pthread_mutex_lock(&L.mu);
    while (!(ok = state()) && now_ms() < until) {
        struct timespec ts;
        deadline_in(&ts, 20);
        pthread_cond_timedwait(&L.cv, &L.mu, &ts);
    }
    pthread_mutex_unlock(&L.mu);
    return ok;
}

static sr_client_t *open_client(void) {
    sr_client_t *c = NULL;
    sr_error_t *err = NULL;
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", DEADLINE_MS);
    sr_option_t opts[] = {{"command_timeout_ms", timeout}};
    int rc = sr_client_open(topo.url, opts, 1, &c, &err);
    if (rc != SR_OK) {
        fprintf(stderr, "    open failed: %d %s\n", rc, sr_error_get_message(err));
        sr_error_free(err);
        return NULL;
    }
    rc = sr_client_wait_ready(c, NULL, &err);
    if (rc != SR_OK) {
        fprintf(stderr, "    wait_ready failed: %d %s\n", rc, sr_error_get_message(err));
        sr_error_free(err);
        sr_client_close(c);
        sr_client_free(c);
        return NULL;
    }
    return c;
}

/* Closes both clients; run on a helper thread so that a close that never returns (a completion
 * lost) fails the test instead of hanging it. */
static void *close_clients(void *arg) {
    (void)arg;
    for (int i = 0; i < 2; i++)
        if (L.clients[i]) sr_client_close(L.clients[i]);
    return NULL;
}

/* Lists the commands not completed within deadline + slack (the first 20), returns how many. */
static size_t report_late(int in_flight) {
    size_t late = 0;
    double now = now_ms();
    pthread_mutex_lock(&L.mu);
    for (size_t i = 0; i < L.len; i++) {
        const op_t *o = &L.ops[i];
        double took = (o->end < 0 ? now : o->end) - o->start;
        if (took <= DEADLINE_MS + SLACK_MS) continue;
        if (late++ < 20)
            fprintf(stderr, "    %s #%zu %s after %.0f ms%s%s\n", o->client ? "PING" : "INCR", i,
                    o->end < 0 ? "still pending" : "completed late", took,
                    o->end < 0 ? "" : ": ", o->end < 0 ? "" : sr_error_code_name(o->rc));
    }
    printf("    2 clients: %zu commands (%ld ok, errors {", L.len, L.acked);
    for (int c = 0, first = 1; c < MAX_CODES; c++)
        if (L.errors[c]) {
            printf("%s%s: %ld", first ? "" : ", ", sr_error_code_name(c), L.errors[c]);
            first = 0;
        }
    printf("}), %d in flight at the kill, %zu late or missing, %ld SIGPIPE raised in the host\n",
           in_flight, late, atomic_load(&sigpipes));
    pthread_mutex_unlock(&L.mu);
    if (late)
        FAIL("%d commands in flight at the kill: %zu not completed within %d ms + %d ms of issue "
             "(listed above)",
             in_flight, late, DEADLINE_MS, SLACK_MS);
    return late;
}

static void test_kill9_under_16_callbacks_on_the_first_of_2_clients(void) {
    pthread_t driver_thread, closer;
    int driver_started = 0;
    int in_flight = 0;
    char cmd[64];

    L.old_port = topo.primary_port;
    L.clients[0] = open_client();
    L.clients[1] = open_client();
    if (!L.clients[0] || !L.clients[1]) {
        FAIL("clients did not open");
        goto close;
    }
    if (sr_client_set_event_callback(L.clients[0], on_event, NULL) != SR_OK) {
        FAIL("sr_client_set_event_callback failed");
        goto close;
    }
    if (pthread_create(&driver_thread, NULL, driver, NULL) != 0) {
        FAIL("pthread_create failed");
        goto close;
    }
    driver_started = 1;

    if (!wait_state(writes_before_kill, 15000)) {
        FAIL("writes before the kill: fewer than 200 acknowledged within 15 s");
        goto stop;
    }
    double kill_sent_at = now_ms();
    snprintf(cmd, sizeof cmd, "kill9 %d", L.old_port);
    if (topo_cmd(&topo, cmd) != 0) {
        FAIL("sr-topology %s: %s", cmd, topo.line);
        goto stop;
    }
    pthread_mutex_lock(&L.mu);
    for (size_t i = 0; i < L.len; i++)
        if (L.ops[i].start <= kill_sent_at && (L.ops[i].end < 0 || L.ops[i].end >= kill_sent_at))
            in_flight++;
    pthread_mutex_unlock(&L.mu);
    if (!wait_state(switched, FAILOVER_MS)) {
        FAIL("no primary_changed away from the killed primary %d within %d ms", L.old_port,
             FAILOVER_MS);
        goto stop;
    }
    pthread_mutex_lock(&L.mu);
    long acked_at_switch = L.acked;
    acked_target = acked_at_switch + 100;
    pthread_mutex_unlock(&L.mu);
    /* Writes succeed again, or a command is already late (then the report says which). */
    if (!wait_state(writes_after_switch, FAILOVER_MS)) FAIL("writes after the switch: too few");

stop:
    pthread_mutex_lock(&L.mu);
    L.stop = 1;
    pthread_cond_broadcast(&L.cv);
    pthread_mutex_unlock(&L.mu);
    if (driver_started) pthread_join(driver_thread, NULL);
    /* Wait for the state "nothing pending", bounded by the last deadline plus the slack. */
    pthread_mutex_lock(&L.mu);
    settle_by = (L.len ? L.ops[L.len - 1].start : now_ms()) + DEADLINE_MS + SLACK_MS;
    pthread_mutex_unlock(&L.mu);
    wait_state(settled, DEADLINE_MS + SLACK_MS + 5000);
    report_late(in_flight);
    pthread_mutex_lock(&L.mu);
    if (L.unexpected) FAIL("%ld completions with an error other than timeout/connection_lost", L.unexpected);
    if (L.twice) FAIL("%ld completions delivered twice", L.twice);
    if (L.out_of_memory) FAIL("out of memory for the ledger");
    if (in_flight == 0) FAIL("no command was in flight when the kill was sent");
    if (driver_started && L.acked <= acked_target - 100) FAIL("no write succeeded after the switch");
    pthread_mutex_unlock(&L.mu);
    if (SR_FAIL_ON_SIGPIPE && atomic_load(&sigpipes))
        FAIL("the library raised SIGPIPE %ld times in the host process (a C program with the default "
             "disposition is killed by it)",
             atomic_load(&sigpipes));

close:
    if (pthread_create(&closer, NULL, close_clients, NULL) != 0) {
        FAIL("pthread_create failed");
        return;
    }
    struct timespec ts;
    deadline_in(&ts, 10000);
    if (pthread_timedjoin_np(closer, NULL, &ts) != 0) {
        /* Leave everything as it is: the callbacks may still run. */
        FAIL("sr_client_close did not return within 10 s");
        return;
    }
    /* Close delivers every completion before it returns. */
    if (L.pending) FAIL("%zu completions never delivered, even by close", L.pending);
    for (int i = 0; i < 2; i++) {
        sr_client_free(L.clients[i]);
        L.clients[i] = NULL;
    }
    free(L.ops);
    L.ops = NULL;
}

int main(int argc, char **argv) {
    int passed = 0, failed = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: %s /path/to/sr-topology\n", argv[0]);
        return 2;
    }
    /* Counted, not ignored: see the top of this file. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigpipe;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGPIPE, &sa, NULL);
    if (sr_runtime_set_worker_threads(2, NULL) != SR_OK) {
        fprintf(stderr, "sr_runtime_set_worker_threads failed\n");
        return 1;
    }
    if (topo_start(&topo, argv[1]) != 0) {
        fprintf(stderr, "could not start the topology\n");
        topo_stop(&topo);
        return 1;
    }
    printf("topology up: %s\n", topo.url);
    double start = now_ms();
    failures_in_test = 0;
    test_kill9_under_16_callbacks_on_the_first_of_2_clients();
    printf("%s kill9_under_16_callbacks_on_the_first_of_2_clients (%.0f ms)\n",
           failures_in_test ? "FAIL" : "ok  ", now_ms() - start);
    failures_in_test ? failed++ : passed++;
    topo_stop(&topo);
    /* Stop the core's threads so leak checkers see a quiet process. */
    sr_runtime_shutdown(5000);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
