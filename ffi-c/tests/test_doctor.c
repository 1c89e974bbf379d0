/* C tests of sr_doctor() and of address_map's callback form (sr_client_open_mapped()) against a
 * real Redis + Sentinel topology (sr-topology).
 *
 * Usage: test_doctor /path/to/sr-topology
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

static topo_t topo;

/* ---------------------------------------------------------------- doctor */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int calls;
    int exit_code;
    char *json; /* copied */
    int error_code;
} doctor_wait_t;

static void on_doctor(void *user_data, const char *json, int exit_code, const sr_error_t *error) {
    doctor_wait_t *w = user_data;
    pthread_mutex_lock(&w->mu);
    w->calls++;
    w->exit_code = exit_code;
    w->json = json ? strdup(json) : NULL;
    w->error_code = error ? sr_error_get_code(error) : SR_OK;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void test_doctor_refuses_bad_input_before_starting(void) {
    sr_error_t *err = NULL;
    char *json = (char *)1;
    int code = 7;
    sr_option_t bad[] = {{"address_map", "10.0.0.5:6379"}};
    doctor_wait_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, NULL, 0};
    CHECK_RC(sr_doctor("redis+sentinel://127.0.0.1:1/m", bad, 1, NULL, on_doctor, &w, &err),
             SR_ERR_CONFIG);
    CHECK(strstr(sr_error_get_message(err), "address_map entry #1") != NULL);
    sr_error_free(err);
    CHECK_RC(sr_doctor("redis+sentinel://127.0.0.1:1/m", NULL, 0, NULL, NULL, NULL, NULL),
             SR_ERR_INVALID_ARGUMENT);
    CHECK_RC(sr_doctor_blocking("nope://x/m", NULL, 0, NULL, &json, &code, NULL), SR_ERR_CONFIG);
    CHECK(json == NULL && code == -1);
    CHECK_RC(sr_doctor_blocking("redis+sentinel://127.0.0.1:1/m", NULL, 0, NULL, NULL, NULL, NULL),
             SR_ERR_INVALID_ARGUMENT);
    usleep(100000);
    CHECK(w.calls == 0); /* a refused start never calls back */
    sr_string_free(NULL);
}

static void test_doctor_blocking_and_callback_report_the_topology(void) {
    char *json = NULL;
    int code = -1;
    sr_error_t *err = NULL;
    sr_doctor_options_t how = {0, 3, NULL, NULL};
    doctor_wait_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, -2, NULL, -1};
    struct timespec deadline;

    CHECK_RC(sr_doctor_blocking(topo.url, NULL, 0, &how, &json, &code, &err), SR_OK);
    CHECK(json != NULL);
    CHECK(strstr(json, "\"schema\": 1") != NULL);
    CHECK(strstr(json, "\"service\": \"mymaster\"") != NULL);
    CHECK(strstr(json, "\"samples\": 3") != NULL); /* the pings option reached the core */
    /* A healthy topology: exit code 0, and the JSON says so too. */
    CHECK(code == 0);
    CHECK(strstr(json, "\"status\": \"healthy\"") != NULL);
    sr_string_free(json);

    CHECK_RC(sr_doctor(topo.url, NULL, 0, NULL, on_doctor, &w, &err), SR_OK);
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    pthread_mutex_lock(&w.mu);
    while (w.calls == 0 && pthread_cond_timedwait(&w.cv, &w.mu, &deadline) == 0) {
    }
    pthread_mutex_unlock(&w.mu);
    CHECK(w.calls == 1);
    CHECK(w.error_code == SR_OK && w.exit_code == 0);
    CHECK(w.json != NULL && strstr(w.json, "\"verdict\"") != NULL);
    free(w.json);
    usleep(100000);
    CHECK(w.calls == 1); /* exactly once */
}

/* ---------------------------------------------------------------- address_map callback */

typedef struct {
    int primary_port;
    atomic_int calls;
} map_state_t;

/* Sends the primary through the name `localhost`; everything else as reported. */
static int map_primary_to_localhost(void *user_data, const char *host, uint16_t port,
                                    char *mapped_host, size_t mapped_host_len,
                                    uint16_t *mapped_port) {
    map_state_t *s = user_data;
    atomic_fetch_add(&s->calls, 1);
    if (port != s->primary_port || strcmp(host, "127.0.0.1") != 0) return 0;
    snprintf(mapped_host, mapped_host_len, "localhost");
    *mapped_port = port;
    return 1;
}

static void test_address_map_callback_maps_what_sentinels_report(void) {
    map_state_t s;
    sr_client_t *c = NULL;
    sr_topology_t *t = NULL;
    sr_reply_t *reply = NULL;
    sr_error_t *err = NULL;
    const char *ping[] = {"PING"};
    s.primary_port = topo.primary_port;
    atomic_init(&s.calls, 0);
    CHECK_RC(sr_client_open_mapped(topo.url, NULL, 0, map_primary_to_localhost, &s, &c, &err),
             SR_OK);
    CHECK_RC(sr_client_wait_ready(c, &t, &err), SR_OK);
    CHECK(t->primary != NULL);
    CHECK(strcmp(t->primary->host, "localhost") == 0);
    CHECK(t->primary->port == topo.primary_port);
    CHECK(t->primary->announced != NULL);
    CHECK(strcmp(t->primary->announced->host, "127.0.0.1") == 0);
    CHECK(t->primary->announced->port == topo.primary_port);
    for (size_t i = 0; i < t->replicas_len; i++) CHECK(t->replicas[i].announced == NULL);
    sr_topology_free(t);
    CHECK(atomic_load(&s.calls) > 0);
    CHECK_RC(sr_client_execute_blocking(c, 1, ping, NULL, &reply, &err), SR_OK);
    sr_reply_free(reply);
    CHECK_RC(sr_client_close(c), SR_OK);
    sr_client_free(c);
}

/* Replicas announce 127.0.0.99 (nothing answered there before the data nodes bound it too; the
 * testkit checks); the callback sends the client to 127.0.0.1, and the promotion after a kill -9
 * is followed under the mapped address, the announced one kept beside it. Last: it changes the
 * topology. */
#define ANNOUNCED "127.0.0.99"

static int map_announced_to_loopback(void *user_data, const char *host, uint16_t port,
                                     char *mapped_host, size_t mapped_host_len,
                                     uint16_t *mapped_port) {
    (void)user_data;
    if (strcmp(host, ANNOUNCED) != 0) return 0;
    snprintf(mapped_host, mapped_host_len, "127.0.0.1");
    *mapped_port = port;
    return 1;
}

/* Whether `a` is 127.0.0.1:port (any port when 0) announced as ANNOUNCED. */
static int is_mapped(const sr_address_t *a, int port) {
    return a && strcmp(a->host, "127.0.0.1") == 0 && (port == 0 || a->port == port) &&
           a->announced && strcmp(a->announced->host, ANNOUNCED) == 0 &&
           a->announced->port == a->port;
}

/* Polls the client's topology until `want` holds (10 ms apart, `ms` at most). */
static int wait_topology(sr_client_t *c, int ms, int (*want)(const sr_topology_t *, int), int arg) {
    for (int waited = 0; waited < ms; waited += 10) {
        sr_topology_t *t = NULL;
        if (sr_client_topology(c, &t, NULL) == SR_OK) {
            int ok = want(t, arg);
            sr_topology_free(t);
            if (ok) return 1;
        }
        usleep(10000);
    }
    return 0;
}

static int replicas_mapped(const sr_topology_t *t, int count) {
    if ((int)t->replicas_len != count) return 0;
    for (size_t i = 0; i < t->replicas_len; i++)
        if (!is_mapped(&t->replicas[i], 0)) return 0;
    return 1;
}

static int primary_mapped(const sr_topology_t *t, int port) {
    return is_mapped(t->primary, port);
}

static void test_a_mapped_topology_is_followed_through_a_kill9_failover(void) {
    sr_client_t *c = NULL;
    sr_reply_t *reply = NULL;
    sr_error_t *err = NULL;
    char cmd[64], host[64];
    const char *set[] = {"SET", "c:mapped:after", "1"};
    sr_option_t opts[] = {{"command_timeout_ms", "5000"}};
    CHECK(topo_cmd(&topo, "announce-replicas " ANNOUNCED) == 0);
    CHECK_RC(sr_client_open_mapped(topo.url, opts, 1, map_announced_to_loopback, NULL, &c, &err),
             SR_OK);
    CHECK(wait_topology(c, 30000, replicas_mapped, 2));
    int old = topo.primary_port;
    snprintf(cmd, sizeof cmd, "kill9 %d", old);
    CHECK(topo_cmd(&topo, cmd) == 0);
    snprintf(cmd, sizeof cmd, "wait-primary-not %d 40000", old);
    CHECK(topo_cmd(&topo, cmd) == 0);
    int promoted = (int)topo_json_int(topo.line, NULL, "port");
    CHECK(topo_json_str(topo.line, "host", host, sizeof host) == 0);
    CHECK(strcmp(host, ANNOUNCED) == 0); /* what the sentinels report */
    CHECK(wait_topology(c, 40000, primary_mapped, promoted));
    CHECK_RC(sr_client_execute_blocking(c, 3, set, NULL, &reply, &err), SR_OK);
    sr_reply_free(reply);
    CHECK_RC(sr_client_close(c), SR_OK);
    sr_client_free(c);
}

int main(int argc, char **argv) {
    static const test_t offline[] = {
        {"doctor_refuses_bad_input_before_starting", test_doctor_refuses_bad_input_before_starting},
    };
    static const test_t live[] = {
        {"doctor_blocking_and_callback_report_the_topology",
         test_doctor_blocking_and_callback_report_the_topology},
        {"address_map_callback_maps_what_sentinels_report",
         test_address_map_callback_maps_what_sentinels_report},
        {"a_mapped_topology_is_followed_through_a_kill9_failover",
         test_a_mapped_topology_is_followed_through_a_kill9_failover},
    };
    return RUN_SUITE(argc, argv, &topo, offline, live);
}
