/* Pub/sub through the C ABI against a real Redis + Sentinel topology (sr-topology): a
 * subscription receives messages published before and after a kill -9 failover, with
 * SR_EVENT_SUBSCRIPTION_LOST then SR_EVENT_SUBSCRIPTION_RESTORED in between, and what the gap lost
 * is counted (a publisher thread counts what it sent, the callback what it received).
 *
 * Usage: test_pubsub /path/to/sr-topology
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
#include "suite.h"
#include "topology.h"

#define FAILOVER_MS 90000
#define MAX_MESSAGES 100000

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

/* What the message and event callbacks saw, guarded by mu; cv is signalled on every change. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long *seqs; /* payloads of "news" messages, in arrival order */
    int received;
    int pattern_messages; /* messages matched by "alerts.*" */
    int bad_messages;     /* a message whose fields were not as expected */
    int lost_at;          /* events seen when subscription_lost arrived (0: not yet) */
    int restored_at;      /* events seen when subscription_restored arrived (0: not yet) */
    int lost_port;
    int restored_port;
    uint64_t gap_ms;
    int events;
    atomic_int closed; /* set once sr_subscription_close() returned */
    atomic_int after_close;
} seen_t;

static void on_message(void *user_data, const sr_message_t *m) {
    seen_t *s = user_data;
    if (atomic_load(&s->closed)) atomic_fetch_add(&s->after_close, 1);
    pthread_mutex_lock(&s->mu);
    if (m->pattern) {
        if (m->pattern_len == 8 && memcmp(m->pattern, "alerts.*", 8) == 0 && m->channel_len == 10 &&
            memcmp(m->channel, "alerts.cpu", 10) == 0 && m->payload_len == 3 &&
            memcmp(m->payload, "hot", 3) == 0)
            s->pattern_messages++;
        else
            s->bad_messages++;
    } else if (m->channel_len == 4 && memcmp(m->channel, "news", 4) == 0 && m->payload_len < 32 &&
               s->received < MAX_MESSAGES) {
        char text[32];
        memcpy(text, m->payload, m->payload_len);
        text[m->payload_len] = '\0';
        s->seqs[s->received++] = strtol(text, NULL, 10);
    } else {
        s->bad_messages++;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void on_event(void *user_data, const sr_event_t *ev) {
    seen_t *s = user_data;
    pthread_mutex_lock(&s->mu);
    s->events++;
    if (ev->kind == SR_EVENT_SUBSCRIPTION_LOST && !s->lost_at) {
        s->lost_at = s->events;
        s->lost_port = ev->address ? ev->address->port : -1;
        printf("    event %s\n", ev->json);
    }
    if (ev->kind == SR_EVENT_SUBSCRIPTION_RESTORED && s->lost_at && !s->restored_at) {
        s->restored_at = s->events;
        s->restored_port = ev->address ? ev->address->port : -1;
        s->gap_ms = ev->gap_ms;
        printf("    event %s\n", ev->json);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Waits until pred(s) holds (checked under the lock), up to ms; 1 if it does. */
static int wait_for(seen_t *s, int (*pred)(const seen_t *, long), long arg, long ms) {
    struct timespec ts;
    deadline_in(&ts, ms);
    pthread_mutex_lock(&s->mu);
    while (!pred(s, arg))
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts)) break;
    int ok = pred(s, arg);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

static int received_at_least(const seen_t *s, long n) { return s->received >= n; }
static int restored(const seen_t *s, long unused) {
    (void)unused;
    return s->restored_at != 0;
}
/* 20 messages numbered `from` or later have arrived. */
static int twenty_from(const seen_t *s, long from) {
    int n = 0;
    for (int i = 0; i < s->received; i++) n += s->seqs[i] >= from;
    return n >= 20;
}
static int pattern_message(const seen_t *s, long unused) {
    (void)unused;
    return s->pattern_messages > 0;
}

/* The publisher: PUBLISH news N with N = 0, 1, ... until told to stop. */
typedef struct {
    sr_client_t *client;
    atomic_int stop;
    atomic_long attempted;
    atomic_long acknowledged;
} publisher_t;

static void *publish_loop(void *arg) {
    publisher_t *p = arg;
    while (!atomic_load(&p->stop)) {
        char n[32];
        long seq = atomic_fetch_add(&p->attempted, 1);
        snprintf(n, sizeof n, "%ld", seq);
        const char *argv[] = {"PUBLISH", "news", n};
        sr_reply_t *reply = NULL;
        if (sr_client_execute_blocking(p->client, 3, argv, NULL, &reply, NULL) == SR_OK)
            atomic_fetch_add(&p->acknowledged, 1);
        sr_reply_free(reply);
        usleep(5000);
    }
    return NULL;
}

static void test_null_arguments(void) {
    const char *ch[] = {"a"};
    sr_subscription_t *sub = (sr_subscription_t *)1;
    CHECK_RC(sr_client_subscribe(NULL, 1, ch, NULL, 0, NULL, NULL, 0, on_message, NULL, NULL, NULL),
             SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_client_subscribe_blocking(NULL, 1, ch, NULL, 0, NULL, NULL, 0, on_message, NULL,
                                          &sub, NULL),
             SR_ERR_INVALID_ARGUMENT);
    CHECK(sub == NULL);
    CHECK_RC(sr_subscription_change(NULL, SR_SUBSCRIBE, 1, ch, NULL, NULL, NULL),
             SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_subscription_close(NULL), SR_ERR_INVALID_ARGUMENT);
    CHECK(sr_subscription_dropped(NULL) == 0);
    sr_subscription_free(NULL);
}

static void test_messages_across_a_kill9_failover(void) {
    seen_t s;
    publisher_t p;
    pthread_t publisher;
    sr_client_t *c = NULL;
    sr_subscription_t *sub = NULL;
    sr_error_t *err = NULL;
    sr_option_t opts[] = {{"command_timeout_ms", "10000"}};
    const char *channels[] = {"news"};
    const char *patterns[] = {"alerts.*"};
    char cmd[64];
    memset(&s, 0, sizeof s);
    memset(&p, 0, sizeof p);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.cv, NULL);
    s.seqs = calloc(MAX_MESSAGES, sizeof *s.seqs);
    CHECK(s.seqs != NULL);

    CHECK_RC(sr_client_open(topo.url, opts, 1, &c, NULL), SR_OK);
    CHECK_RC(sr_client_wait_ready(c, NULL, NULL), SR_OK);
    CHECK_RC(sr_client_set_event_callback(c, on_event, &s), SR_OK);
    int rc = sr_client_subscribe_blocking(c, 1, channels, NULL, 0, NULL, NULL, 0, on_message, &s,
                                          &sub, &err);
    if (rc != SR_OK) fprintf(stderr, "    subscribe: %s\n", sr_error_get_message(err));
    CHECK_RC(rc, SR_OK);

    p.client = c;
    CHECK(pthread_create(&publisher, NULL, publish_loop, &p) == 0);
    CHECK(wait_for(&s, received_at_least, 20, 20000));

    int old_port = topo.primary_port;
    snprintf(cmd, sizeof cmd, "kill9 %d", old_port);
    CHECK(topo_cmd(&topo, cmd) == 0);
    long killed = now_ms();
    printf("    killed primary %d\n", old_port);
    CHECK(wait_for(&s, restored, 0, FAILOVER_MS));
    long after_restore = atomic_load(&p.attempted);
    printf("    subscription restored %ld ms after the kill\n", now_ms() - killed);
    CHECK(wait_for(&s, twenty_from, after_restore, 30000));
    atomic_store(&p.stop, 1);
    pthread_join(publisher, NULL);

    pthread_mutex_lock(&s.mu);
    int received = s.received, in_order = 1, lost_at = s.lost_at, restored_at = s.restored_at;
    int lost_port = s.lost_port, restored_port = s.restored_port;
    uint64_t gap = s.gap_ms;
    for (int i = 1; i < received; i++) in_order &= s.seqs[i - 1] < s.seqs[i];
    long last = received ? s.seqs[received - 1] : -1;
    pthread_mutex_unlock(&s.mu);
    long attempted = atomic_load(&p.attempted);
    printf("    %ld published (%ld acknowledged), %d received, %ld lost in a gap of %llu ms, "
           "%llu dropped by the buffer\n",
           attempted, atomic_load(&p.acknowledged), received, attempted - received,
           (unsigned long long)gap, (unsigned long long)sr_subscription_dropped(sub));
    CHECK(lost_at > 0 && restored_at > lost_at);
    CHECK(lost_port == old_port);
    CHECK(restored_port > 0 && restored_port != old_port);
    CHECK(gap > 0);
    CHECK(in_order);
    CHECK(last < attempted);
    CHECK(sr_subscription_dropped(sub) == 0);
    topo.primary_port = restored_port;

    /* Patterns can be added at runtime; their messages carry the pattern. */
    CHECK_RC(sr_subscription_change_blocking(sub, SR_PSUBSCRIBE, 1, patterns, NULL, NULL), SR_OK);
    const char *alert[] = {"PUBLISH", "alerts.cpu", "hot"};
    sr_reply_t *reply = NULL;
    CHECK_RC(sr_client_execute_blocking(c, 3, alert, NULL, &reply, NULL), SR_OK);
    sr_reply_free(reply);
    CHECK(wait_for(&s, pattern_message, 0, 10000));
    CHECK(s.bad_messages == 0);

    /* Once close returns, the callback is never called again. */
    CHECK_RC(sr_subscription_close(sub), SR_OK);
    atomic_store(&s.closed, 1);
    const char *more[] = {"PUBLISH", "news", "999999"};
    for (int i = 0; i < 5; i++) {
        reply = NULL;
        CHECK_RC(sr_client_execute_blocking(c, 3, more, NULL, &reply, NULL), SR_OK);
        sr_reply_free(reply);
    }
    CHECK(atomic_load(&s.after_close) == 0);
    CHECK_RC(sr_subscription_close(sub), SR_ERR_CLOSED);
    CHECK_RC(sr_subscription_change_blocking(sub, SR_SUBSCRIBE, 1, channels, NULL, NULL),
             SR_ERR_CLOSED);
    sr_subscription_free(sub);
    CHECK_RC(sr_client_close(c), SR_OK);
    sr_client_free(c);
    free(s.seqs);
}

int main(int argc, char **argv) {
    static const test_t offline[] = {
        {"null_arguments", test_null_arguments},
    };
    static const test_t live[] = {
        {"messages_across_a_kill9_failover", test_messages_across_a_kill9_failover},
    };
    return RUN_SUITE(argc, argv, &topo, offline, live);
}
