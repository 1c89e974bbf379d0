/* The host mailbox through the C ABI against a real Redis + Sentinel topology (sr-topology):
 * completions and events queue in an sr_mailbox_t and are drained on threads of this test's
 * own; a burst costs one wake-up, order is kept, every accepted call completes exactly once
 * (drained, or handed back as closed by sr_mailbox_close()), close is a barrier, and events
 * start with the current primary. The *_into forms of pub/sub, transactions and the doctor
 * complete the same way: once each, with their op id, refused (no completion) for NULLs and
 * for a closed mailbox, nothing after sr_mailbox_close() returned.
 *
 * Usage: test_mailbox /path/to/sr-topology
 * Prints one line per test and a closing "N passed, N failed"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sentinel_recovery.h"
#include "check.h"
#include "suite.h"
#include "topology.h"

#define N 200

static topo_t topo;
/* argv[1]: the sr-topology binary, for a test that needs a topology of its own. */
static const char *topology_bin;

/* What a mailbox's wake-up and deliveries saw. */
typedef struct {
    sem_t woken;        /* posted by the wake-up */
    atomic_int wakes;   /* wake-ups so far */
    atomic_int stop;    /* tells the drainer thread to end */
    int drains;         /* drains that delivered at least one item (drainer thread only) */
    int count[N + 8];   /* completions seen per op id, drained or handed back */
    long order[N + 8];  /* op ids in delivery order */
    int64_t value[N + 8]; /* INCR reply per op id */
    int delivered;      /* completions delivered by drains */
    int handed_back;    /* completions handed back by close, each with SR_ERR_CLOSED */
    int bad;            /* a delivery not as expected */
    int results_len;    /* the pipeline's results */
    int ready_port;     /* primary port of the wait-ready completion's topology */
    int events;
    int logs;           /* log records with a target and a message */
    int first_event_kind;
    int first_event_port; /* new primary's port of the first event; -1 none */
    int first_event_had_old;
    sr_mailbox_t *mb;
    /* close barrier: the first delivery waits on `release` after posting `entered` */
    int hold_first;
    sem_t entered, release;
    atomic_int closed_returned;
    atomic_int delivered_after_close;
} box_t;

static void on_wake(void *user_data) {
    box_t *b = user_data;
    atomic_fetch_add(&b->wakes, 1);
    sem_post(&b->woken);
}

static void on_delivery(void *user_data, const sr_delivery_t *d) {
    box_t *b = user_data;
    if (atomic_load(&b->closed_returned)) atomic_fetch_add(&b->delivered_after_close, 1);
    if (d->kind == SR_DELIVERY_COMPLETION) {
        if (d->op_id >= N + 8) {
            b->bad++;
            return;
        }
        b->order[b->delivered] = (long)d->op_id;
        __atomic_store_n(&b->delivered, b->delivered + 1, __ATOMIC_SEQ_CST);
        b->count[d->op_id]++;
        if (d->reply) {
            int64_t v = 0;
            if (sr_reply_integer(d->reply, &v) == SR_OK) b->value[d->op_id] = v;
        } else if (d->results) {
            b->results_len = (int)sr_results_len(d->results);
        } else if (d->topology) {
            b->ready_port = d->topology->primary ? d->topology->primary->port : -1;
        } else if (!d->error) {
            b->bad++;
        }
        if (b->hold_first && b->delivered == 1) {
            sem_post(&b->entered);
            sem_wait(&b->release);
        }
    } else if (d->kind == SR_DELIVERY_EVENT) {
        if (b->events++ == 0) {
            b->first_event_kind = d->event->kind;
            b->first_event_had_old = d->event->old_primary != NULL;
            b->first_event_port = d->event->address ? d->event->address->port : -1;
        }
    } else if (d->kind == SR_DELIVERY_LOG) {
        if (d->target && d->message && d->level >= SR_LOG_TRACE && strstr(d->message, "hunter2") == NULL)
            b->logs++;
        else
            b->bad++;
    } else if (d->kind != SR_DELIVERY_DROPPED) {
        b->bad++;
    }
}

static void on_handed_back(void *user_data, const sr_delivery_t *d) {
    box_t *b = user_data;
    if (d->kind != SR_DELIVERY_COMPLETION || !d->error || d->reply || d->results ||
        sr_error_get_code(d->error) != SR_ERR_CLOSED || d->op_id >= N + 8) {
        b->bad++;
        return;
    }
    b->count[d->op_id]++;
    b->handed_back++;
}

static void box_init(box_t *b) {
    memset(b, 0, sizeof *b);
    sem_init(&b->woken, 0, 0);
    sem_init(&b->entered, 0, 0);
    sem_init(&b->release, 0, 0);
    b->first_event_port = -1;
}

static void box_destroy(box_t *b) {
    sem_destroy(&b->woken);
    sem_destroy(&b->entered);
    sem_destroy(&b->release);
}

/* The test's own draining thread: one drain per wake-up, until told to stop. */
static void *drainer(void *arg) {
    box_t *b = arg;
    for (;;) {
        sem_wait(&b->woken);
        if (atomic_load(&b->stop)) return NULL;
        size_t n = 0;
        int rc = sr_mailbox_drain(b->mb, on_delivery, b, &n);
        if (rc == SR_OK && n > 0) b->drains++;
        if (rc != SR_OK && rc != SR_ERR_CLOSED) b->bad++;
    }
}

/* Waits (up to 30 s) until the drainer delivered `want` completions. */
static void wait_delivered(box_t *b, int want) {
    long start = now_ms();
    while (__atomic_load_n(&b->delivered, __ATOMIC_SEQ_CST) < want && now_ms() - start < 30000) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

static void stop_drainer(box_t *b, pthread_t t) {
    atomic_store(&b->stop, 1);
    sem_post(&b->woken);
    pthread_join(t, NULL);
}

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

static int incr_into(sr_client_t *c, const char *key, sr_mailbox_t *mb, uint64_t op_id) {
    const char *argv[] = {"INCR", key};
    return sr_client_execute_into(c, 2, argv, NULL, NULL, mb, op_id);
}

/* INCR, waited for on this thread: the new value, or -1. */
static int64_t incr_blocking(sr_client_t *c, const char *key) {
    const char *argv[] = {"INCR", key};
    sr_reply_t *r = NULL;
    int64_t v = -1;
    if (sr_client_execute_blocking(c, 2, argv, NULL, &r, NULL) == SR_OK) sr_reply_integer(r, &v);
    sr_reply_free(r);
    return v;
}

static int del(sr_client_t *c, const char *key) {
    const char *argv[] = {"DEL", key};
    sr_reply_t *r = NULL;
    int rc = sr_client_execute_blocking(c, 2, argv, NULL, &r, NULL);
    sr_reply_free(r);
    return rc;
}

static void test_null_arguments(void) {
    sr_mailbox_t *mb = (sr_mailbox_t *)1;
    box_t b;
    box_init(&b);
    CHECK_RC(sr_mailbox_new(4, NULL, NULL, &mb), SR_ERR_INVALID_ARGUMENT);
    CHECK(mb == NULL);
    CHECK_RC(sr_mailbox_new(4, on_wake, &b, NULL), SR_ERR_INVALID_ARGUMENT);
    size_t n = 7;
    CHECK_RC(sr_mailbox_drain(NULL, on_delivery, &b, &n), SR_ERR_INVALID_ARGUMENT);
    CHECK(n == 0);
    CHECK_RC(sr_mailbox_close(NULL, NULL, NULL), SR_ERR_INVALID_ARGUMENT);
    sr_mailbox_free(NULL);
    const char *argv[] = {"PING"};
    CHECK_RC(sr_client_execute_into(NULL, 1, argv, NULL, NULL, NULL, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_set_event_mailbox(NULL, NULL), SR_ERR_INVALID_ARGUMENT);
    /* an empty mailbox drains nothing and never woke */
    CHECK_RC(sr_mailbox_new(4, on_wake, &b, &mb), SR_OK);
    CHECK_RC(sr_mailbox_drain(mb, NULL, NULL, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_mailbox_drain(mb, on_delivery, &b, &n), SR_OK);
    CHECK(n == 0 && atomic_load(&b.wakes) == 0);
    CHECK_RC(sr_mailbox_close(mb, on_handed_back, &b), SR_OK);
    CHECK_RC(sr_mailbox_close(mb, on_handed_back, &b), SR_ERR_CLOSED);
    CHECK_RC(sr_mailbox_drain(mb, on_delivery, &b, &n), SR_ERR_CLOSED);
    sr_mailbox_free(mb);
    box_destroy(&b);
}

/* N commands queued while nobody drains cost one wake-up; one drain on a thread of the test's
 * own then delivers all of them, in the order the connection answered them. */
static void test_a_burst_costs_one_wake_up(void) {
    box_t b;
    box_init(&b);
    sr_client_t *c = open_client();
    CHECK(c != NULL);
    CHECK_RC(sr_client_wait_ready(c, NULL, NULL), SR_OK);
    CHECK_RC(del(c, "mb:burst"), SR_OK);
    CHECK_RC(sr_mailbox_new(16, on_wake, &b, &b.mb), SR_OK);
    for (int i = 0; i < N; i++) CHECK_RC(incr_into(c, "mb:burst", b.mb, (uint64_t)i), SR_OK);
    /* one more INCR, waited for: its reply follows the others' on the connection */
    CHECK(incr_blocking(c, "mb:burst") == N + 1);
    /* nothing is in flight: close fails nothing, and every completion is in the mailbox */
    CHECK_RC(sr_client_close(c), SR_OK);
    CHECK(atomic_load(&b.wakes) == 1);
    pthread_t t;
    pthread_create(&t, NULL, drainer, &b);
    /* the drainer answers the one wake-up, still pending on its semaphore */
    wait_delivered(&b, N);
    stop_drainer(&b, t);
    CHECK(b.bad == 0);
    CHECK(b.delivered == N);
    CHECK(b.drains == 1);
    CHECK(atomic_load(&b.wakes) == 1);
    for (int i = 0; i < N; i++) {
        CHECK(b.order[i] == i);
        CHECK(b.count[i] == 1);
        CHECK(b.value[i] == i + 1);
    }
    printf("    %d completions, %d wake-up, %d drain\n", b.delivered, atomic_load(&b.wakes),
           b.drains);
    CHECK_RC(sr_mailbox_close(b.mb, on_handed_back, &b), SR_OK);
    CHECK(b.handed_back == 0);
    sr_mailbox_free(b.mb);
    sr_client_free(c);
    box_destroy(&b);
}

/* Completions drained as they come on the test's own thread: each arrives once, in order, and
 * every wake-up is answered by a drain that delivers something (no spurious wake-ups). */
static void test_drained_as_they_come_on_a_thread_of_its_own(void) {
    box_t b;
    box_init(&b);
    sr_client_t *c = open_client();
    CHECK(c != NULL);
    CHECK_RC(sr_client_wait_ready(c, NULL, NULL), SR_OK);
    CHECK_RC(del(c, "mb:flow"), SR_OK);
    CHECK_RC(sr_mailbox_new(16, on_wake, &b, &b.mb), SR_OK);
    pthread_t t;
    pthread_create(&t, NULL, drainer, &b);
    for (int i = 0; i < N; i++) CHECK_RC(incr_into(c, "mb:flow", b.mb, (uint64_t)i), SR_OK);
    /* a pipeline's completion queues with the others */
    const char *set[] = {"SET", "mb:p", "1"}, *get[] = {"GET", "mb:p"}, *ping[] = {"PING"};
    sr_command_t cmds[] = {{3, set, NULL}, {2, get, NULL}, {1, ping, NULL}};
    CHECK_RC(sr_client_pipeline_into(c, cmds, 3, NULL, b.mb, N), SR_OK);
    wait_delivered(&b, N + 1);
    CHECK_RC(sr_client_close(c), SR_OK);
    stop_drainer(&b, t);
    CHECK(b.bad == 0);
    CHECK(b.delivered == N + 1);
    /* the INCRs in the order the connection answered them; the pipeline (a task of its own)
       may land anywhere among them */
    int next = 0;
    for (int i = 0; i <= N; i++) {
        if (b.order[i] == N) continue;
        CHECK(b.order[i] == next);
        next++;
    }
    CHECK(next == N);
    for (int i = 0; i < N; i++) {
        CHECK(b.count[i] == 1);
        CHECK(b.value[i] == i + 1);
    }
    CHECK(b.count[N] == 1 && b.results_len == 3);
    int wakes = atomic_load(&b.wakes);
    CHECK(wakes == b.drains && wakes >= 1 && wakes <= N + 1);
    printf("    %d completions, %d wake-ups, %d drains\n", b.delivered, wakes, b.drains);
    CHECK_RC(sr_mailbox_close(b.mb, NULL, NULL), SR_OK);
    sr_mailbox_free(b.mb);
    sr_client_free(c);
    box_destroy(&b);
}

static void *close_mailbox(void *arg) {
    box_t *b = arg;
    int rc = sr_mailbox_close(b->mb, on_handed_back, b);
    atomic_store(&b->closed_returned, rc == SR_OK ? 1 : -1);
    return NULL;
}

/* sr_mailbox_close() while a drain on another thread is inside its first delivery: close waits
 * for that delivery, the drain stops after it, the rest are handed back as closed, each op id
 * completes exactly once, and nothing runs after close returned. */
static void test_close_is_a_barrier_and_completes_each_call_once(void) {
    box_t b;
    box_init(&b);
    sr_client_t *c = open_client();
    CHECK(c != NULL);
    CHECK_RC(sr_client_wait_ready(c, NULL, NULL), SR_OK);
    CHECK_RC(sr_mailbox_new(16, on_wake, &b, &b.mb), SR_OK);
    b.hold_first = 1;
    for (int i = 0; i < N; i++) CHECK_RC(incr_into(c, "mb:close", b.mb, (uint64_t)i), SR_OK);
    CHECK_RC(sr_client_close(c), SR_OK);
    pthread_t t, closer;
    pthread_create(&t, NULL, drainer, &b);
    sem_wait(&b.entered); /* the drainer is inside its first delivery */
    pthread_create(&closer, NULL, close_mailbox, &b);
    struct timespec ts = {0, 100 * 1000000};
    nanosleep(&ts, NULL);
    int returned_early = atomic_load(&b.closed_returned);
    sem_post(&b.release);
    pthread_join(closer, NULL);
    int wakes_at_close = atomic_load(&b.wakes);
    stop_drainer(&b, t);
    CHECK(returned_early == 0);
    CHECK(atomic_load(&b.closed_returned) == 1);
    CHECK(b.bad == 0);
    CHECK(b.delivered == 1);
    CHECK(b.handed_back == N - 1);
    for (int i = 0; i < N; i++) CHECK(b.count[i] == 1);
    /* after close: nothing accepted, nothing delivered, no wake-up */
    size_t n = 9;
    CHECK_RC(sr_mailbox_drain(b.mb, on_delivery, &b, &n), SR_ERR_CLOSED);
    CHECK(n == 0);
    CHECK_RC(sr_mailbox_close(b.mb, on_handed_back, &b), SR_ERR_CLOSED);
    sr_client_t *c2 = open_client();
    CHECK(c2 != NULL);
    CHECK_RC(incr_into(c2, "mb:close", b.mb, 1), SR_ERR_CLOSED);
    CHECK_RC(sr_client_set_event_mailbox(c2, b.mb), SR_ERR_CLOSED);
    CHECK(atomic_load(&b.wakes) == wakes_at_close);
    CHECK(atomic_load(&b.delivered_after_close) == 0);
    printf("    1 delivered, %d handed back as closed\n", b.handed_back);
    sr_client_free(c2);
    sr_mailbox_free(b.mb);
    sr_client_free(c);
    box_destroy(&b);
}

/* Waiting for the first discovery completes into the mailbox with the topology; events go to
 * the mailbox, the first one saying which primary is current. */
static void test_ready_then_events_starting_with_the_current_primary(void) {
    box_t b;
    box_init(&b);
    sr_client_t *c = open_client();
    CHECK(c != NULL);
    CHECK_RC(sr_mailbox_new(16, on_wake, &b, &b.mb), SR_OK);
    CHECK_RC(sr_client_wait_ready_into(c, NULL, b.mb, 7), SR_OK);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    rt.tv_sec += 20;
    CHECK(sem_timedwait(&b.woken, &rt) == 0);
    CHECK_RC(sr_mailbox_drain(b.mb, on_delivery, &b, NULL), SR_OK);
    CHECK(b.bad == 0 && b.delivered == 1 && b.order[0] == 7 && b.count[7] == 1);
    CHECK(b.ready_port == topo.primary_port);
    CHECK_RC(sr_client_set_event_mailbox(c, b.mb), SR_OK);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    CHECK(sem_timedwait(&b.woken, &ts) == 0);
    CHECK_RC(sr_mailbox_drain(b.mb, on_delivery, &b, NULL), SR_OK);
    CHECK(b.bad == 0 && b.events >= 1);
    CHECK(b.first_event_kind == SR_EVENT_PRIMARY_CHANGED);
    CHECK(!b.first_event_had_old);
    CHECK(b.first_event_port == topo.primary_port);
    CHECK_RC(sr_client_set_event_mailbox(c, NULL), SR_OK);
    CHECK_RC(sr_client_close(c), SR_OK);
    CHECK_RC(sr_mailbox_close(b.mb, NULL, NULL), SR_OK);
    sr_mailbox_free(b.mb);
    sr_client_free(c);
    box_destroy(&b);
}

/* Core log records go to a mailbox, drained on the test's own thread. */
static void test_log_records_go_to_a_mailbox(void) {
    box_t b;
    box_init(&b);
    CHECK_RC(sr_mailbox_new(4096, on_wake, &b, &b.mb), SR_OK);
    CHECK_RC(sr_set_log_mailbox(b.mb, SR_LOG_DEBUG), SR_OK);
    pthread_t t;
    pthread_create(&t, NULL, drainer, &b);
    sr_client_t *c = open_client();
    CHECK(c != NULL);
    CHECK_RC(sr_client_wait_ready(c, NULL, NULL), SR_OK);
    CHECK_RC(sr_client_close(c), SR_OK);
    CHECK_RC(sr_set_log_mailbox(NULL, 0), SR_OK);
    long start = now_ms();
    while (__atomic_load_n(&b.logs, __ATOMIC_SEQ_CST) == 0 && now_ms() - start < 10000) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    CHECK_RC(sr_mailbox_close(b.mb, NULL, NULL), SR_OK);
    stop_drainer(&b, t);
    CHECK(b.bad == 0);
    CHECK(b.logs > 0);
    printf("    %d log records\n", b.logs);
    CHECK_RC(sr_set_log_mailbox(b.mb, SR_LOG_DEBUG), SR_ERR_CLOSED);
    sr_mailbox_free(b.mb);
    sr_client_free(c);
    box_destroy(&b);
}


/* ---- the *_into forms of pub/sub, transactions and the doctor ---- */

#define R 64

/* What the completions of one mailbox carried, drained on the test's thread. */
typedef struct {
    sem_t woken;
    sr_mailbox_t *mb;
    int n;                 /* completions delivered */
    uint64_t op[R];        /* their op ids, in delivery order */
    int code[R];           /* error code, or SR_OK */
    char what[R];          /* the field set: r reply, R results, s subscription, t transaction,
                              m message, j json, - none */
    char text[R][32];      /* a reply's or a message's bytes (NUL-terminated, cut) */
    long num[R];           /* an integer reply, a results count, an exit code */
    sr_subscription_t *sub; /* handed over by the subscribe completion */
    sr_transaction_t *tx;   /* handed over by the begin completion */
    sr_subscription_t *rearm; /* next_into again from each message's delivery, with... */
    uint64_t next_id;         /* ...these op ids */
    atomic_int closed_returned;
    int after_close;
    int bad;
} rec_t;

static void rec_wake(void *user_data) { sem_post(&((rec_t *)user_data)->woken); }

static void rec_text(char *out, const uint8_t *data, size_t len) {
    if (len > 31) len = 31;
    memcpy(out, data, len);
    out[len] = '\0';
}

static void rec_delivery(void *user_data, const sr_delivery_t *d) {
    rec_t *r = user_data;
    if (atomic_load(&r->closed_returned)) r->after_close++;
    if (d->kind != SR_DELIVERY_COMPLETION || r->n >= R) {
        r->bad++;
        return;
    }
    int i = r->n++;
    r->op[i] = d->op_id;
    r->code[i] = d->error ? sr_error_get_code(d->error) : SR_OK;
    r->what[i] = '-';
    int set = (d->reply != NULL) + (d->results != NULL) + (d->topology != NULL) + (d->subscription != NULL) +
              (d->transaction != NULL) + (d->pubsub_message != NULL) + (d->json != NULL);
    if (set > 1 || (set == 1 && d->error)) r->bad++;
    if (d->reply) {
        const uint8_t *data;
        size_t len;
        int64_t v;
        r->what[i] = 'r';
        if (sr_reply_bytes(d->reply, &data, &len) == SR_OK) rec_text(r->text[i], data, len);
        if (sr_reply_integer(d->reply, &v) == SR_OK) r->num[i] = (long)v;
    } else if (d->results) {
        r->what[i] = 'R';
        r->num[i] = (long)sr_results_len(d->results);
    } else if (d->subscription) {
        r->what[i] = 's';
        r->sub = d->subscription;
    } else if (d->transaction) {
        r->what[i] = 't';
        r->tx = d->transaction;
    } else if (d->pubsub_message) {
        r->what[i] = 'm';
        rec_text(r->text[i], d->pubsub_message->payload, d->pubsub_message->payload_len);
        if (r->rearm && sr_subscription_next_into(r->rearm, r->mb, r->next_id++) != SR_OK) r->bad++;
    } else if (d->json) {
        r->what[i] = 'j';
        r->num[i] = d->exit_code;
        if (d->json[0] != '{') r->bad++;
    }
}

static void rec_handed_back(void *user_data, const sr_delivery_t *d) {
    rec_t *r = user_data;
    if (d->kind != SR_DELIVERY_COMPLETION || !d->error || sr_error_get_code(d->error) != SR_ERR_CLOSED ||
        d->subscription || d->transaction || r->n >= R) {
        r->bad++;
        return;
    }
    r->op[r->n] = d->op_id;
    r->code[r->n] = SR_ERR_CLOSED;
    r->what[r->n++] = 'x';
}

static int rec_init(rec_t *r) {
    memset(r, 0, sizeof *r);
    sem_init(&r->woken, 0, 0);
    return sr_mailbox_new(16, rec_wake, r, &r->mb);
}

static void rec_destroy(rec_t *r) {
    sr_mailbox_free(r->mb);
    sem_destroy(&r->woken);
}

/* Drains on this thread, one drain per wake-up, until `want` completions arrived (or 20 s). */
static void rec_until(rec_t *r, int want) {
    long start = now_ms();
    while (r->n < want && now_ms() - start < 20000) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        if (sem_timedwait(&r->woken, &ts) == 0) {
            int rc = sr_mailbox_drain(r->mb, rec_delivery, r, NULL);
            if (rc != SR_OK) r->bad++;
        }
    }
}

static int blocking(sr_client_t *c, size_t argc, const char **argv) {
    sr_reply_t *reply = NULL;
    int rc = sr_client_execute_blocking(c, argc, argv, NULL, &reply, NULL);
    sr_reply_free(reply);
    return rc;
}

/* NULL handles and a NULL mailbox are refused before anything starts. */
static void test_into_forms_refuse_nulls(void) {
    rec_t r;
    CHECK_RC(rec_init(&r), SR_OK);
    const char *names[] = {"ch"};
    const char *argv[] = {"PING"};
    sr_command_t cmd = {1, argv, NULL};
    CHECK_RC(sr_client_subscribe_into(NULL, 1, names, NULL, 0, NULL, NULL, 0, NULL, r.mb, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_subscription_next_into(NULL, r.mb, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_subscription_change_into(NULL, SR_SUBSCRIBE, 1, names, NULL, r.mb, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_transaction_begin_into(NULL, NULL, r.mb, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_transaction_watch_into(NULL, 1, names, NULL, r.mb, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_transaction_execute_into(NULL, 1, argv, NULL, r.mb, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_transaction_exec_into(NULL, &cmd, 1, r.mb, 1), SR_ERR_INVALID_ARGUMENT);
    sr_error_t *err = (sr_error_t *)1;
    CHECK_RC(sr_doctor_into(NULL, NULL, 0, NULL, NULL, r.mb, 1, &err), SR_ERR_INVALID_ARGUMENT);
    CHECK(err != NULL && sr_error_get_code(err) == SR_ERR_INVALID_ARGUMENT);
    sr_error_free(err);
    CHECK_RC(sr_doctor_into("redis+sentinel://127.0.0.1:1/m", NULL, 0, NULL, NULL, NULL, 1, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_doctor_into("http://x/y", NULL, 0, NULL, NULL, r.mb, 1, &err), SR_ERR_CONFIG);
    sr_error_free(err);
    /* a NULL mailbox, with a live client, subscription and transaction */
    sr_client_t *c = open_client();
    CHECK(c != NULL);
    CHECK_RC(sr_client_subscribe_into(c, 1, names, NULL, 0, NULL, NULL, 0, NULL, NULL, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_transaction_begin_into(c, NULL, NULL, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_subscribe_into(c, 1, names, NULL, 0, NULL, NULL, 0, NULL, r.mb, 2), SR_OK);
    CHECK_RC(sr_client_transaction_begin_into(c, NULL, r.mb, 3), SR_OK);
    rec_until(&r, 2);
    CHECK(r.n == 2 && r.bad == 0 && r.sub != NULL && r.tx != NULL);
    CHECK_RC(sr_subscription_next_into(r.sub, NULL, 4), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_subscription_change_into(r.sub, SR_SUBSCRIBE, 1, names, NULL, NULL, 4), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_subscription_change_into(r.sub, 99, 1, names, NULL, r.mb, 4), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_transaction_watch_into(r.tx, 1, names, NULL, NULL, 4), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_transaction_execute_into(r.tx, 1, argv, NULL, NULL, 4), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_transaction_exec_into(r.tx, &cmd, 1, NULL, 4), SR_ERR_INVALID_ARGUMENT);
    /* nothing refused ever completes */
    CHECK_RC(sr_client_close(c), SR_OK);
    CHECK_RC(sr_mailbox_drain(r.mb, rec_delivery, &r, NULL), SR_OK);
    CHECK(r.n == 2 && r.bad == 0);
    sr_transaction_free(r.tx);
    sr_subscription_free(r.sub);
    sr_client_free(c);
    CHECK_RC(sr_mailbox_close(r.mb, NULL, NULL), SR_OK);
    rec_destroy(&r);
}

/* Subscribe, then read the messages one at a time, each next_into started from the delivery of
 * the one before: every message once, in the order published; a change completes with nothing
 * set; closing the subscription ends a waiting next_into (no message, no error), and a closed
 * subscription refuses further ones. */
static void test_pubsub_into_reads_messages_in_order(void) {
    enum { MESSAGES = 30 };
    rec_t r;
    CHECK_RC(rec_init(&r), SR_OK);
    sr_client_t *c = open_client();
    CHECK(c != NULL);
    const char *channels[] = {"into:news"};
    CHECK_RC(sr_client_subscribe_into(c, 1, channels, NULL, 0, NULL, NULL, 0, NULL, r.mb, 100), SR_OK);
    rec_until(&r, 1);
    CHECK(r.n == 1 && r.op[0] == 100 && r.what[0] == 's' && r.code[0] == SR_OK);
    const char *more[] = {"into:more"};
    CHECK_RC(sr_subscription_change_into(r.sub, SR_SUBSCRIBE, 1, more, NULL, r.mb, 101), SR_OK);
    rec_until(&r, 2);
    CHECK(r.n == 2 && r.op[1] == 101 && r.what[1] == '-' && r.code[1] == SR_OK);
    for (int i = 0; i < MESSAGES; i++) {
        char payload[16];
        snprintf(payload, sizeof payload, "%d", i);
        const char *argv[] = {"PUBLISH", i % 2 ? "into:more" : "into:news", payload};
        CHECK_RC(blocking(c, 3, argv), SR_OK);
    }
    r.rearm = r.sub;
    r.next_id = 1000;
    CHECK_RC(sr_subscription_next_into(r.sub, r.mb, r.next_id++), SR_OK);
    rec_until(&r, 2 + MESSAGES);
    CHECK(r.bad == 0 && r.n == 2 + MESSAGES);
    for (int i = 0; i < MESSAGES; i++) {
        char payload[16];
        snprintf(payload, sizeof payload, "%d", i);
        CHECK(r.op[2 + i] == (uint64_t)(1000 + i) && r.what[2 + i] == 'm');
        CHECK(strcmp(r.text[2 + i], payload) == 0);
    }
    /* one more next_into is waiting; closing the subscription ends it */
    r.rearm = NULL;
    CHECK_RC(sr_subscription_close(r.sub), SR_OK);
    rec_until(&r, 3 + MESSAGES);
    CHECK(r.n == 3 + MESSAGES && r.op[2 + MESSAGES] == (uint64_t)(1000 + MESSAGES));
    CHECK(r.what[2 + MESSAGES] == '-' && r.code[2 + MESSAGES] == SR_OK);
    CHECK_RC(sr_subscription_next_into(r.sub, r.mb, 1), SR_ERR_CLOSED);
    CHECK_RC(sr_subscription_change_into(r.sub, SR_SUBSCRIBE, 1, more, NULL, r.mb, 1), SR_ERR_CLOSED);
    CHECK(sr_subscription_dropped(r.sub) == 0);
    printf("    %d messages in order through the mailbox\n", MESSAGES);
    sr_subscription_free(r.sub);
    CHECK_RC(sr_client_close(c), SR_OK);
    CHECK_RC(sr_mailbox_close(r.mb, NULL, NULL), SR_OK);
    sr_client_free(c);
    rec_destroy(&r);
}

/* A transaction's steps through the mailbox, each completing once with its op id: begin hands
 * the transaction over, WATCH gives OK, a read its reply, EXEC one result per command; after a
 * watched key changed EXEC completes with nothing (no results, no error); a step after EXEC
 * completes with SR_ERR_CONFIG. */
static void test_transaction_into_steps(void) {
    rec_t r;
    CHECK_RC(rec_init(&r), SR_OK);
    sr_client_t *c = open_client();
    CHECK(c != NULL);
    const char *del_k[] = {"DEL", "into:tx"};
    CHECK_RC(blocking(c, 2, del_k), SR_OK);
    CHECK_RC(sr_client_transaction_begin_into(c, NULL, r.mb, 1), SR_OK);
    rec_until(&r, 1);
    CHECK(r.n == 1 && r.op[0] == 1 && r.what[0] == 't');
    const char *keys[] = {"into:tx"};
    const char *get[] = {"GET", "into:tx"}, *set[] = {"SET", "into:tx", "5"}, *incr[] = {"INCR", "into:tx"};
    sr_command_t cmds[] = {{3, set, NULL}, {2, incr, NULL}};
    /* each step waited for before the next: steps started back to back may run out of order
       in the core today (an EXEC before an earlier GET, which then finds the transaction
       ended), whatever form starts them */
    CHECK_RC(sr_transaction_watch_into(r.tx, 1, keys, NULL, r.mb, 2), SR_OK);
    rec_until(&r, 2);
    CHECK_RC(sr_transaction_execute_into(r.tx, 2, get, NULL, r.mb, 3), SR_OK);
    rec_until(&r, 3);
    CHECK_RC(sr_transaction_exec_into(r.tx, cmds, 2, r.mb, 4), SR_OK);
    rec_until(&r, 4);
    CHECK(r.bad == 0 && r.n == 4);
    CHECK(r.op[1] == 2 && r.what[1] == 'r' && strcmp(r.text[1], "OK") == 0);
    CHECK(r.op[2] == 3 && r.what[2] == 'r' && r.code[2] == SR_OK && r.text[2][0] == '\0'); /* nil */
    CHECK(r.op[3] == 4 && r.what[3] == 'R' && r.num[3] == 2);
    CHECK_RC(sr_transaction_execute_into(r.tx, 2, get, NULL, r.mb, 5), SR_OK);
    rec_until(&r, 5);
    CHECK(r.op[4] == 5 && r.code[4] == SR_ERR_CONFIG);
    sr_transaction_free(r.tx);
    r.tx = NULL;
    /* a watched key changed: EXEC completes with neither results nor error */
    CHECK_RC(sr_client_transaction_begin_into(c, NULL, r.mb, 6), SR_OK);
    rec_until(&r, 6);
    CHECK(r.op[5] == 6 && r.what[5] == 't');
    CHECK_RC(sr_transaction_watch_into(r.tx, 1, keys, NULL, r.mb, 7), SR_OK);
    rec_until(&r, 7);
    CHECK(r.op[6] == 7 && r.code[6] == SR_OK);
    CHECK_RC(blocking(c, 3, set), SR_OK);
    CHECK_RC(sr_transaction_exec_into(r.tx, cmds, 2, r.mb, 8), SR_OK);
    rec_until(&r, 8);
    CHECK(r.bad == 0 && r.op[7] == 8 && r.what[7] == '-' && r.code[7] == SR_OK);
    sr_transaction_free(r.tx);
    CHECK_RC(sr_client_close(c), SR_OK);
    CHECK_RC(sr_mailbox_close(r.mb, NULL, NULL), SR_OK);
    sr_client_free(c);
    rec_destroy(&r);
}

/* The composite transaction through the mailbox: WATCH and the commands in one call, one
 * completion with one result per command; a command that can't be queued completes with
 * SR_ERR_CONFIG; the cancel handle from the options ends it while EXEC runs on the server (a
 * topology of its own, whose sentinels wait 60 s before they call a sleeping primary down). */
static void test_transaction_into_in_one_call(void) {
    rec_t r;
    CHECK_RC(rec_init(&r), SR_OK);
    topo_t slow;
    const char *const patient[] = {"--replicas", "0", "--down-after", "60000", NULL};
    CHECK_RC(topo_start_with(&slow, topology_bin, patient), 0);
    sr_client_t *c = NULL;
    CHECK_RC(sr_client_open(slow.url, NULL, 0, &c, NULL), SR_OK);
    CHECK(c != NULL);
    const char *keys[] = {"into:one"};
    const char *set[] = {"SET", "into:one", "5"}, *incr[] = {"INCR", "into:one"}, *blpop[] = {"BLPOP", "x", "0"};
    sr_command_t cmds[] = {{3, set, NULL}, {2, incr, NULL}};
    CHECK_RC(sr_client_transaction_into(NULL, cmds, 2, 1, keys, NULL, NULL, r.mb, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_transaction_into(c, NULL, 2, 1, keys, NULL, NULL, r.mb, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_transaction_into(c, cmds, 2, 1, NULL, NULL, NULL, r.mb, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_transaction_into(c, cmds, 2, 1, keys, NULL, NULL, NULL, 1), SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_transaction_into(c, cmds, 2, 1, keys, NULL, NULL, r.mb, 1), SR_OK);
    rec_until(&r, 1);
    CHECK(r.bad == 0 && r.n == 1 && r.op[0] == 1 && r.what[0] == 'R' && r.num[0] == 2);
    sr_command_t refused[] = {{3, set, NULL}, {3, blpop, NULL}};
    CHECK_RC(sr_client_transaction_into(c, refused, 2, 0, NULL, NULL, NULL, r.mb, 2), SR_OK);
    rec_until(&r, 2);
    CHECK(r.op[1] == 2 && r.code[1] == SR_ERR_CONFIG);
    /* the server runs EXEC for 3 s; the cancel ends the call long before */
    const char *sleep3[] = {"DEBUG", "SLEEP", "3"};
    sr_command_t slow_exec[] = {{3, sleep3, NULL}};
    sr_operation_t *op = NULL;
    sr_call_options_t o = {0, &op};
    long start = now_ms();
    CHECK_RC(sr_client_transaction_into(c, slow_exec, 1, 0, NULL, NULL, &o, r.mb, 3), SR_OK);
    CHECK(op != NULL);
    usleep(200 * 1000);
    sr_operation_cancel(op);
    rec_until(&r, 3);
    long took = now_ms() - start;
    printf("    cancelled after %ld ms\n", took);
    CHECK(r.op[2] == 3 && r.code[2] == SR_ERR_CLOSED && took < 2500);
    sr_operation_free(op);
    CHECK(r.bad == 0);
    CHECK_RC(sr_client_close(c), SR_OK);
    CHECK_RC(sr_mailbox_close(r.mb, NULL, NULL), SR_OK);
    sr_client_free(c);
    topo_stop(&slow);
    rec_destroy(&r);
}

/* The doctor's report through the mailbox: once, with its op id, the JSON and the verdict; a
 * watching diagnosis ends at once when cancelled. */
static void test_doctor_into_completes_with_the_report(void) {
    rec_t r;
    CHECK_RC(rec_init(&r), SR_OK);
    sr_doctor_options_t how;
    memset(&how, 0, sizeof how);
    how.pings = 1;
    CHECK_RC(sr_doctor_into(topo.url, NULL, 0, &how, NULL, r.mb, 42, NULL), SR_OK);
    rec_until(&r, 1);
    CHECK(r.bad == 0 && r.n == 1 && r.op[0] == 42 && r.what[0] == 'j');
    CHECK(r.num[0] >= 0 && r.num[0] <= 2);
    printf("    verdict %ld\n", r.num[0]);
    /* a diagnosis that would sample for 30 s, stopped with its cancel handle */
    how.watch_ms = 30000;
    sr_operation_t *op = (sr_operation_t *)1;
    CHECK_RC(sr_doctor_into(topo.url, NULL, 0, &how, &op, NULL, 43, NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK(op == NULL);
    long start = now_ms();
    CHECK_RC(sr_doctor_into(topo.url, NULL, 0, &how, &op, r.mb, 43, NULL), SR_OK);
    CHECK(op != NULL);
    usleep(200 * 1000);
    sr_operation_cancel(op);
    rec_until(&r, 2);
    long took = now_ms() - start;
    printf("    watching doctor cancelled after %ld ms\n", took);
    CHECK(r.bad == 0 && r.n == 2 && r.op[1] == 43 && r.code[1] == SR_ERR_CLOSED && took < 10000);
    sr_operation_free(op);
    CHECK_RC(sr_mailbox_close(r.mb, NULL, NULL), SR_OK);
    rec_destroy(&r);
}

/* A closed mailbox: every *_into form refuses with SR_ERR_CLOSED; completions queued before the
 * close (a subscription, a transaction) are handed back as closed and released by the library;
 * one in flight at the close is discarded, and nothing is delivered after close returned. */
static void test_into_forms_and_a_closed_mailbox(void) {
    rec_t r, open;
    CHECK_RC(rec_init(&r), SR_OK);
    CHECK_RC(rec_init(&open), SR_OK);
    sr_client_t *c = open_client(), *c2 = open_client();
    CHECK(c != NULL && c2 != NULL);
    const char *names[] = {"into:closed"};
    /* a subscription and a transaction to call with, through another mailbox */
    CHECK_RC(sr_client_subscribe_into(c2, 1, names, NULL, 0, NULL, NULL, 0, NULL, open.mb, 1), SR_OK);
    CHECK_RC(sr_client_transaction_begin_into(c2, NULL, open.mb, 2), SR_OK);
    rec_until(&open, 2);
    CHECK(open.sub != NULL && open.tx != NULL);
    /* queued, not drained (closing `c` waits until they are in the mailbox), then handed back
       by the mailbox's close; the library frees what they carry */
    CHECK_RC(sr_client_subscribe_into(c, 1, names, NULL, 0, NULL, NULL, 0, NULL, r.mb, 10), SR_OK);
    CHECK_RC(sr_client_transaction_begin_into(c, NULL, r.mb, 11), SR_OK);
    CHECK_RC(sr_client_close(c), SR_OK);
    /* in flight at the close: waits for a message published after it */
    CHECK_RC(sr_subscription_next_into(open.sub, r.mb, 12), SR_OK);
    CHECK_RC(sr_mailbox_close(r.mb, rec_handed_back, &r), SR_OK);
    atomic_store(&r.closed_returned, 1);
    CHECK(r.bad == 0 && r.n == 2);
    CHECK(r.what[0] == 'x' && r.what[1] == 'x');
    CHECK((r.op[0] == 10 && r.op[1] == 11) || (r.op[0] == 11 && r.op[1] == 10));
    const char *pub[] = {"PUBLISH", "into:closed", "late"};
    CHECK_RC(blocking(c2, 3, pub), SR_OK);
    const char *argv[] = {"PING"};
    sr_command_t cmd = {1, argv, NULL};
    CHECK_RC(sr_client_subscribe_into(c2, 1, names, NULL, 0, NULL, NULL, 0, NULL, r.mb, 20), SR_ERR_CLOSED);
    CHECK_RC(sr_subscription_next_into(open.sub, r.mb, 21), SR_ERR_CLOSED);
    CHECK_RC(sr_subscription_change_into(open.sub, SR_SUBSCRIBE, 1, names, NULL, r.mb, 22), SR_ERR_CLOSED);
    CHECK_RC(sr_client_transaction_begin_into(c2, NULL, r.mb, 23), SR_ERR_CLOSED);
    CHECK_RC(sr_transaction_watch_into(open.tx, 1, names, NULL, r.mb, 24), SR_ERR_CLOSED);
    CHECK_RC(sr_transaction_execute_into(open.tx, 1, argv, NULL, r.mb, 25), SR_ERR_CLOSED);
    CHECK_RC(sr_transaction_exec_into(open.tx, &cmd, 1, r.mb, 26), SR_ERR_CLOSED);
    sr_error_t *err = NULL;
    CHECK_RC(sr_doctor_into(topo.url, NULL, 0, NULL, NULL, r.mb, 27, &err), SR_ERR_CLOSED);
    CHECK(err != NULL && sr_error_get_code(err) == SR_ERR_CLOSED);
    sr_error_free(err);
    /* the client's close waits for the next_into in flight (done by the message, or ended) */
    sr_transaction_free(open.tx);
    sr_subscription_free(open.sub);
    CHECK_RC(sr_client_close(c2), SR_OK);
    size_t n = 5;
    CHECK_RC(sr_mailbox_drain(r.mb, rec_delivery, &r, &n), SR_ERR_CLOSED);
    CHECK(n == 0 && r.after_close == 0 && r.n == 2);
    CHECK_RC(sr_mailbox_close(open.mb, NULL, NULL), SR_OK);
    sr_client_free(c);
    sr_client_free(c2);
    rec_destroy(&r);
    rec_destroy(&open);
}

int main(int argc, char **argv) {
    static const test_t offline[] = {
        {"null_arguments", test_null_arguments},
    };
    static const test_t live[] = {
        {"a_burst_costs_one_wake_up", test_a_burst_costs_one_wake_up},
        {"drained_as_they_come_on_a_thread_of_its_own",
         test_drained_as_they_come_on_a_thread_of_its_own},
        {"close_is_a_barrier_and_completes_each_call_once",
         test_close_is_a_barrier_and_completes_each_call_once},
        {"ready_then_events_starting_with_the_current_primary",
         test_ready_then_events_starting_with_the_current_primary},
        {"log_records_go_to_a_mailbox", test_log_records_go_to_a_mailbox},
        {"into_forms_refuse_nulls", test_into_forms_refuse_nulls},
        {"pubsub_into_reads_messages_in_order", test_pubsub_into_reads_messages_in_order},
        {"transaction_into_steps", test_transaction_into_steps},
        {"transaction_into_in_one_call", test_transaction_into_in_one_call},
        {"doctor_into_completes_with_the_report", test_doctor_into_completes_with_the_report},
        {"into_forms_and_a_closed_mailbox", test_into_forms_and_a_closed_mailbox},
    };
    (void)topo_cmd; /* this suite needs no fault of the topology */
    topology_bin = argc > 1 ? argv[1] : NULL;
    return RUN_SUITE(argc, argv, &topo, offline, live);
}
