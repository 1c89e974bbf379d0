/* The shared deadline cases (tests/cases/deadlines.tsv, which every binding's suite reads; its
 * header describes the columns). Commands run through sr_client_execute_blocking_with (a
 * per-call timeout) and sr_client_execute_blocking (the client's command_timeout_ms), pipelines
 * through sr_client_pipeline_blocking, transactions through the composite sr_client_transaction
 * (its sr_call_options_t.timeout_ms bounds the whole transaction, EXEC included), cancel cases
 * through sr_client_execute_with / sr_client_pipeline / sr_client_transaction and
 * sr_operation_cancel; subscribes through sr_client_subscribe
 * (bounded by the client's command_timeout_ms), the doctor through sr_doctor_blocking with
 * connect_timeout_ms = timeout_ms (a failure report within 3 x timeout_ms); their cancel cases
 * through sr_client_subscribe_into / sr_doctor_into (the forms that give a cancel handle) and a
 * mailbox drained on this thread.
 * Each call ends by its deadline with the expected outcome, and afterwards no client is left
 * blocked on the server (INFO clients: blocked_clients back to what it was), i.e. a timed-out
 * blocking command's connection was closed; after a "paused" case (the current primary stopped,
 * on a topology whose down-after is 60 s) or a "failover" case (sr-topology's stall-failover: a
 * failover that can't finish until release-failover) the same client answers a PING once the
 * fault is undone.
 *
 * Usage: test_deadline_cases /path/to/sr-topology   (SR_CASES_FILE is set at compile time)
 * Prints one line per case and a closing "N passed, N failed, N skipped"; exits non-zero on any
 * failure. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sentinel_recovery.h"
#include "cases.h"
#include "topology.h"

#ifndef SR_CASES_FILE
#error "compile with -DSR_CASES_FILE=\"/path/to/tests/cases/deadlines.tsv\""
#endif
#define SLACK_MS 1000          /* what a call may take beyond its deadline (busy 2-core machine) */
#define LONG_DEFAULT_MS 30000 /* the client default of a per-call or cancel case */
#define MAX_ARGS 16
#define MAX_COMMANDS 8

static int passed, failed, skipped;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The client of a "no-primary" case: its only sentinel is a loopback port nobody listens on. */
#define NO_PRIMARY_URL "redis+sentinel://127.0.0.1:1/mymaster"

/* A client of `url`; with `ready`, once it found the primary (a no-primary client never does). */
static sr_client_t *open_client(const char *url, long default_ms, int ready) {
    char value[32];
    snprintf(value, sizeof value, "%ld", default_ms);
    sr_option_t opt = {"command_timeout_ms", value};
    sr_client_t *c = NULL;
    sr_error_t *err = NULL;
    if (sr_client_open(url, &opt, 1, &c, &err) != SR_OK || (ready && sr_client_wait_ready(c, NULL, &err) != SR_OK)) {
        fprintf(stderr, "open %s: %s\n", url, err ? sr_error_get_message(err) : "?");
        exit(2);
    }
    return c;
}

/* blocked_clients of the primary's INFO clients, or -1. */
static long blocked_clients(sr_client_t *observer) {
    const char *argv[] = {"INFO", "clients"};
    sr_reply_t *reply = NULL;
    if (sr_client_execute_blocking(observer, 2, argv, NULL, &reply, NULL) != SR_OK) return -1;
    const uint8_t *data = NULL;
    size_t len = 0;
    long n = -1;
    if (sr_reply_bytes(reply, &data, &len) == SR_OK) {
        char *text = strndup((const char *)data, len);
        const char *at = strstr(text, "blocked_clients:");
        if (at) n = strtol(at + strlen("blocked_clients:"), NULL, 10);
        free(text);
    }
    sr_reply_free(reply);
    return n;
}

/* The completion of a cancelled call: its error code, once set. */
typedef struct {
    atomic_int done;
    atomic_int code;
} completion_t;

static void complete(completion_t *c, const sr_error_t *error) {
    atomic_store(&c->code, error ? sr_error_get_code(error) : SR_OK);
    atomic_store(&c->done, 1);
}

static void on_reply(void *user_data, const sr_reply_t *reply, const sr_error_t *error) {
    (void)reply;
    complete(user_data, error);
}

static void on_results(void *user_data, const sr_results_t *results, const sr_error_t *error) {
    (void)results;
    complete(user_data, error);
}

/* The completion of sr_client_subscribe: the subscription (NULL when it failed). */
typedef struct {
    completion_t done;
    sr_subscription_t *subscription;
} subscribed_t;

static void on_subscribed(void *user_data, sr_subscription_t *subscription, const sr_error_t *error) {
    subscribed_t *s = user_data;
    s->subscription = subscription; /* published by complete()'s atomic store */
    complete(&s->done, error);
}

static void on_message(void *user_data, const sr_message_t *message) {
    (void)user_data;
    (void)message;
}

/* The one completion of a *_into call: its code, once delivered (a subscription it hands over is
 * freed). */
typedef struct {
    int done;
    int code;
} delivered_t;

static void on_delivery(void *user_data, const sr_delivery_t *d) {
    delivered_t *got = user_data;
    if (d->kind != SR_DELIVERY_COMPLETION) return;
    got->done = 1;
    got->code = d->error ? sr_error_get_code(d->error) : SR_OK;
    sr_subscription_free(d->subscription); /* ours from the delivery on; NULL when it failed */
}

static void no_wake(void *user_data) { (void)user_data; }

/* Waits until `cancel_after_ms` after `start`, cancels `op`, then drains `mailbox` on this thread
 * until the call's completion arrived (or `budget` + slack passed). Its code, or -1000. */
static int cancelled_into(sr_mailbox_t *mailbox, sr_operation_t *op, double start, long cancel_after_ms,
                          double budget) {
    delivered_t got = {0, 0};
    while (now_ms() - start < (double)cancel_after_ms) usleep(5000);
    sr_operation_cancel(op);
    while (!got.done && now_ms() - start < budget + SLACK_MS) {
        if (sr_mailbox_drain(mailbox, on_delivery, &got, NULL) != SR_OK) break;
        if (!got.done) usleep(1000);
    }
    return got.done ? got.code : -1000;
}

/* Starts a case's fault: the current primary stopped ("paused") or a failover stalled
 * ("failover"). Returns the faulted node's port, 0 for no fault, -1 (said so) when it failed. */
static int fault_begin(topo_t *topo, const char *name, int paused, int failover) {
    if (!paused && !failover) return 0;
    int ok = paused ? topo_cmd(topo, "primary") == 0 : topo_cmd(topo, "stall-failover") == 0;
    int port = ok ? (int)topo_json_int(topo->line, NULL, "port") : 0;
    char control[64];
    snprintf(control, sizeof control, "stop %d", port);
    if (ok && paused) ok = topo_cmd(topo, control) == 0;
    if (!ok || port <= 0) {
        printf("FAIL %s: %s: %s\n", name, paused ? "stop the primary" : "stall-failover", topo->line);
        failed++;
        return -1;
    }
    return port;
}

/* Undoes fault_begin's fault; 0, or -1 (said so) when it failed. */
static int fault_end(topo_t *topo, const char *name, int paused, int failover, int port) {
    char control[64];
    if (paused) snprintf(control, sizeof control, "cont %d", port);
    if (failover) snprintf(control, sizeof control, "release-failover %d 30000", port);
    if ((paused || failover) && topo_cmd(topo, control) != 0) {
        printf("FAIL %s: %s: %s\n", name, control, topo->line);
        failed++;
        return -1;
    }
    return 0;
}

/* A doctor case: sr_doctor_blocking on the case's URL with connect_timeout_ms = timeout_ms and
 * the options in `command` (- none, watch=SECONDS); it must complete with a report whose verdict
 * is failure (exit code 2) within 3 x timeout_ms + slack. */
static void run_doctor_case(topo_t *topo, const char *name, const char *state, long timeout_ms, const char *expect,
                            const char *command, int cancel) {
    int paused = strcmp(state, "paused") == 0;
    int failover = strcmp(state, "failover") == 0;
    int no_primary = strcmp(state, "no-primary") == 0;
    double budget = (cancel ? 1.0 : 3.0) * (double)timeout_ms + SLACK_MS;
    char value[32];
    snprintf(value, sizeof value, "%ld", timeout_ms);
    sr_option_t opt = {"connect_timeout_ms", value};
    sr_doctor_options_t how;
    memset(&how, 0, sizeof how);
    if (strncmp(command, "watch=", strlen("watch=")) == 0) {
        how.watch_ms = strtod(command + strlen("watch="), NULL) * 1000.0;
    } else if (strcmp(command, "-") != 0) {
        printf("FAIL %s: doctor options %s\n", name, command);
        failed++;
        return;
    }
    if (strcmp(expect, cancel ? "cancelled" : "failure") != 0) {
        printf("FAIL %s: a doctor case expecting %s\n", name, expect);
        failed++;
        return;
    }
    int port = fault_begin(topo, name, paused, failover);
    if (port < 0) return;
    char *json = NULL;
    int exit_code = -1;
    sr_error_t *err = NULL;
    alarm((unsigned)(budget / 1000) + 30);
    double start = now_ms();
    const char *url = no_primary ? NO_PRIMARY_URL : topo->url;
    int rc;
    if (cancel) {
        sr_mailbox_t *mb = NULL;
        sr_operation_t *op = NULL;
        rc = sr_mailbox_new(4, no_wake, NULL, &mb);
        if (rc == SR_OK) rc = sr_doctor_into(url, &opt, 1, &how, &op, mb, 1, &err);
        if (rc == SR_OK) rc = cancelled_into(mb, op, start, timeout_ms, budget);
        sr_operation_free(op);
        sr_mailbox_free(mb);
    } else {
        rc = sr_doctor_blocking(url, &opt, 1, &how, &json, &exit_code, &err);
    }
    double took = now_ms() - start;
    alarm(0);
    if (fault_end(topo, name, paused, failover, port) != 0) {
        sr_string_free(json);
        sr_error_free(err);
        return;
    }
    const char *verdict = json ? strstr(json, "\"verdict\"") : NULL;
    const char *wrong = NULL;
    if (took > budget) wrong = cancel ? "ended after its cancel + slack" : "ended after 3 x its deadline + slack";
    else if (cancel) wrong = rc == SR_ERR_CLOSED ? NULL : "not cancelled";
    else if (rc != SR_OK) wrong = "no report";
    else if (exit_code != 2 || !verdict || !strstr(verdict, "\"status\": \"failure\""))
        wrong = "the report's status is not failure";
    if (wrong) {
        printf("FAIL %s: %s (rc %d %s%s%s, exit code %d, %.0f ms, allowed %.0f ms)\n", name, wrong, rc,
               sr_error_code_name(rc), err ? ": " : "", err ? sr_error_get_message(err) : "", exit_code, took, budget);
        failed++;
    } else {
        printf("ok   %s (%.0f ms)\n", name, took);
        passed++;
    }
    sr_string_free(json);
    sr_error_free(err);
}

typedef struct {
    char *args[MAX_COMMANDS][MAX_ARGS];
    sr_command_t commands[MAX_COMMANDS];
    int n;
} commands_t;

/* Splits "A {key} ; B {key}" into commands, {key} replaced by `key`. */
static void parse_commands(commands_t *out, char *text, const char *key) {
    memset(out, 0, sizeof *out);
    char *save_cmd = NULL;
    for (char *cmd = strtok_r(text, ";", &save_cmd); cmd && out->n < MAX_COMMANDS; cmd = strtok_r(NULL, ";", &save_cmd)) {
        int argc = 0;
        char *save_arg = NULL;
        for (char *a = strtok_r(cmd, " ", &save_arg); a && argc < MAX_ARGS; a = strtok_r(NULL, " ", &save_arg)) {
            const char *hole = strstr(a, "{key}");
            if (hole) {
                size_t size = strlen(a) + strlen(key) + 1;
                out->args[out->n][argc] = malloc(size);
                snprintf(out->args[out->n][argc], size, "%.*s%s%s", (int)(hole - a), a, key, hole + strlen("{key}"));
            } else {
                out->args[out->n][argc] = strdup(a);
            }
            argc++;
        }
        out->commands[out->n].argc = (size_t)argc;
        out->commands[out->n].argv = (const char *const *)out->args[out->n];
        out->commands[out->n].argv_len = NULL;
        out->n++;
    }
}

static void free_commands(commands_t *c) {
    for (int i = 0; i < c->n; i++)
        for (size_t j = 0; j < c->commands[i].argc; j++) free(c->args[i][j]);
}

static void run_case(topo_t *topo, sr_client_t *observer, char *line, int serial) {
    char *fields[8];
    int n = 0;
    for (char *f = strtok(line, "\t"); f && n < 8; f = strtok(NULL, "\t")) fields[n++] = f;
    if (n != 8) {
        printf("FAIL malformed case line (%d fields)\n", n);
        failed++;
        return;
    }
    const char *name = fields[0], *kind = fields[1], *deadline = fields[2], *expect = fields[6];
    int per_call = strcmp(deadline, "per-call") == 0;
    int cancel = strcmp(deadline, "cancel") == 0;
    int paused = strcmp(fields[3], "paused") == 0;
    int failover = strcmp(fields[3], "failover") == 0;
    int no_primary = strcmp(fields[3], "no-primary") == 0;
    long timeout_ms = strtol(fields[4], NULL, 10);
    long block_ms = strtol(fields[5], NULL, 10);
    int deflt = !per_call && !cancel;
    double budget = (double)timeout_ms + (deflt ? (double)block_ms : 0) + SLACK_MS;
    int subscribe = strcmp(kind, "subscribe") == 0;
    if (strcmp(kind, "doctor") == 0) {
        run_doctor_case(topo, name, fields[3], timeout_ms, expect, fields[7], cancel);
        return;
    }
    if (!subscribe && strcmp(kind, "command") != 0 && strcmp(kind, "pipeline") != 0 &&
        strcmp(kind, "transaction") != 0) {
        printf("FAIL %s: kind %s\n", name, kind);
        failed++;
        return;
    }

    char key[128];
    snprintf(key, sizeof key, "deadline-case:%s:%d:%d", name, (int)getpid(), serial);
    commands_t cmds;
    parse_commands(&cmds, fields[7], key);

    sr_client_t *c = open_client(no_primary ? NO_PRIMARY_URL : topo->url, deflt ? timeout_ms : LONG_DEFAULT_MS, !no_primary);
    long before = blocked_clients(observer);
    sr_reply_t *reply = NULL;
    sr_results_t *results = NULL;
    sr_error_t *err = NULL;
    sr_call_options_t opts;
    memset(&opts, 0, sizeof opts);
    if (per_call) opts.timeout_ms = (uint64_t)timeout_ms;
    /* The fault: the current primary stopped, or a failover stalled; `faulted` is its port. */
    int faulted = fault_begin(topo, name, paused, failover);
    if (faulted < 0) return;
    /* A call that ignores its deadline fails the suite (SIGALRM) instead of hanging it. */
    alarm((unsigned)(budget / 1000) + 30);
    double start = now_ms();
    int rc;
    const char *const *argv0 = cmds.commands[0].argv;
    if (cancel && subscribe) {
        /* The channels after SUBSCRIBE, through the mailbox form, which gives a cancel handle. */
        sr_mailbox_t *mb = NULL;
        sr_operation_t *op = NULL;
        rc = sr_mailbox_new(4, no_wake, NULL, &mb);
        if (rc == SR_OK)
            rc = sr_client_subscribe_into(c, cmds.commands[0].argc - 1, argv0 + 1, NULL, 0, NULL, NULL, 0, &op, mb, 1);
        if (rc == SR_OK) rc = cancelled_into(mb, op, start, timeout_ms, budget);
        sr_operation_free(op);
        sr_mailbox_free(mb);
    } else if (cancel) {
        completion_t done = {0, 0};
        sr_operation_t *op = NULL;
        opts.operation = &op;
        if (strcmp(kind, "command") == 0)
            rc = sr_client_execute_with(c, cmds.commands[0].argc, argv0, NULL, &opts, on_reply, &done);
        else if (strcmp(kind, "pipeline") == 0)
            rc = sr_client_pipeline(c, cmds.commands, (size_t)cmds.n, &opts, on_results, &done);
        else
            rc = sr_client_transaction(c, cmds.commands, (size_t)cmds.n, 0, NULL, NULL, &opts, on_results, &done);
        if (rc == SR_OK) {
            while (now_ms() - start < (double)timeout_ms) usleep(5000);
            sr_operation_cancel(op);
            while (!atomic_load(&done.done) && now_ms() - start < budget + SLACK_MS) usleep(1000);
            rc = atomic_load(&done.done) ? atomic_load(&done.code) : -1000;
        }
        sr_operation_free(op);
    } else if (subscribe) {
        /* The channels after SUBSCRIBE; bounded by the client's command_timeout_ms. */
        subscribed_t sub = {{0, 0}, NULL};
        rc = sr_client_subscribe(c, cmds.commands[0].argc - 1, argv0 + 1, NULL, 0, NULL, NULL, 0, on_message, NULL,
                                 on_subscribed, &sub);
        if (rc == SR_OK) {
            while (!atomic_load(&sub.done.done) && now_ms() - start < budget + SLACK_MS) usleep(1000);
            rc = atomic_load(&sub.done.done) ? atomic_load(&sub.done.code) : -1000;
        }
        /* Made anyway: closed (a wrong outcome all the same). */
        if (atomic_load(&sub.done.done)) sr_subscription_free(sub.subscription);
    } else if (strcmp(kind, "command") == 0) {
        rc = per_call ? sr_client_execute_blocking_with(c, cmds.commands[0].argc, argv0, NULL, &opts, &reply, &err)
                      : sr_client_execute_blocking(c, cmds.commands[0].argc, argv0, NULL, &reply, &err);
    } else if (strcmp(kind, "pipeline") == 0) {
        rc = sr_client_pipeline_blocking(c, cmds.commands, (size_t)cmds.n, &opts, &results, &err);
    } else {
        /* The composite transaction: its options' timeout (0: command_timeout_ms) bounds all of
         * it, EXEC included. */
        completion_t done = {0, 0};
        rc = sr_client_transaction(c, cmds.commands, (size_t)cmds.n, 0, NULL, NULL, &opts, on_results, &done);
        if (rc == SR_OK) {
            while (!atomic_load(&done.done) && now_ms() - start < budget + SLACK_MS) usleep(1000);
            rc = atomic_load(&done.done) ? atomic_load(&done.code) : -1000;
        }
    }
    double took = now_ms() - start;
    alarm(0);
    if (fault_end(topo, name, paused, failover, faulted) != 0) return;

    const char *wrong = NULL;
    int want = strcmp(expect, "timeout") == 0 ? SR_ERR_TIMEOUT
               : strcmp(expect, "config") == 0 ? SR_ERR_CONFIG
               /* sr_operation_cancel: "its callback is then called ... with SR_ERR_CLOSED" */
               : strcmp(expect, "cancelled") == 0 ? SR_ERR_CLOSED
                                                  : SR_OK;
    if (took > budget) wrong = "ended after its deadline + slack";
    else if (rc != want) wrong = "wrong outcome";
    else if (want == SR_OK && (reply == NULL || sr_reply_type(reply) != SR_REPLY_NIL)) wrong = "expected a nil reply";
    if (!wrong && (paused || failover)) {
        /* The same client works again once the fault is undone. */
        const char *ping[] = {"PING"};
        sr_call_options_t again;
        memset(&again, 0, sizeof again);
        again.timeout_ms = 10000;
        sr_reply_t *pong = NULL;
        if (sr_client_execute_blocking_with(c, 1, ping, NULL, &again, &pong, NULL) != SR_OK)
            wrong = "no PING reply after the fault was undone";
        sr_reply_free(pong);
    }
    if (!wrong) {
        /* Wait (bounded) for the server to unblock the timed-out command's connection. */
        double until = now_ms() + 5000;
        long blocked;
        while ((blocked = blocked_clients(observer)) > before && now_ms() < until) usleep(20000);
        if (blocked > before) wrong = "the server still blocks a client 5 s later";
    }
    if (wrong) {
        printf("FAIL %s: %s (rc %d %s, want %s, %.0f ms, allowed %.0f ms)\n", name, wrong, rc, sr_error_code_name(rc),
               sr_error_code_name(want), took, budget);
        failed++;
    } else {
        printf("ok   %s (%.0f ms)\n", name, took);
        passed++;
    }
    sr_reply_free(reply);
    sr_results_free(results);
    sr_error_free(err);
    sr_client_free(c);
    free_commands(&cmds);
}

typedef struct {
    topo_t *topo;
    sr_client_t *observer;
    int serial;
} cases_run_t;

static void run_line(void *ctx, char *line) {
    cases_run_t *run = ctx;
    run_case(run->topo, run->observer, line, run->serial++);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s /path/to/sr-topology\n", argv[0]);
        return 2;
    }
    /* A down-after far longer than any case: a paused primary stays the primary (no failover); a
     * failover-timeout as long: a stalled failover is not aborted while a case runs. */
    const char *const options[] = {"--replicas", "1", "--down-after", "60000", "--failover-timeout", "60000", NULL};
    topo_t topo;
    if (topo_start_with(&topo, argv[1], options) != 0) {
        fprintf(stderr, "sr-topology did not start\n");
        return 2;
    }
    sr_client_t *observer = open_client(topo.url, 5000, 1);
    cases_run_t run = {&topo, observer, 0};
    int n = for_each_case(SR_CASES_FILE, run_line, &run);
    if (n < 18) {
        printf("FAIL %d cases in %s\n", n, SR_CASES_FILE);
        failed++;
    }
    sr_client_free(observer);
    topo_stop(&topo);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
