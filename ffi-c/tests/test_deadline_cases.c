/* The shared deadline cases (tests/cases/deadlines.tsv, which every binding's suite reads),
 * through sr_client_execute_blocking_with (a per-call timeout) and sr_client_execute_blocking
 * (the client's command_timeout_ms): each call ends by its deadline with the expected outcome,
 * and afterwards no client is left blocked on the server (INFO clients: blocked_clients back to
 * what it was), i.e. a timed-out blocking command's connection was closed.
 *
 * Usage: test_deadline_cases /path/to/sr-topology   (SR_CASES_FILE is set at compile time)
 * Prints one line per case and a closing "N passed, N failed"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sentinel_recovery.h"
#include "topology.h"

#ifndef SR_CASES_FILE
#error "compile with -DSR_CASES_FILE=\"/path/to/tests/cases/deadlines.tsv\""
#endif
#define SLACK_MS 1000          /* what a call may take beyond its deadline (busy 2-core machine) */
#define LONG_DEFAULT_MS 30000 /* the client default of a per-call case */
#define MAX_ARGS 16

static int passed, failed;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static sr_client_t *open_client(const char *url, long default_ms) {
    char value[32];
    snprintf(value, sizeof value, "%ld", default_ms);
    sr_option_t opt = {"command_timeout_ms", value};
    sr_client_t *c = NULL;
    sr_error_t *err = NULL;
    if (sr_client_open(url, &opt, 1, &c, &err) != SR_OK || sr_client_wait_ready(c, NULL, &err) != SR_OK) {
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

static void run_case(const char *url, sr_client_t *observer, char *line, int serial) {
    char *fields[6];
    int n = 0;
    for (char *f = strtok(line, "\t"); f && n < 6; f = strtok(NULL, "\t")) fields[n++] = f;
    if (n != 6) {
        printf("FAIL malformed case line (%d fields)\n", n);
        failed++;
        return;
    }
    const char *name = fields[0];
    int per_call = strcmp(fields[1], "per-call") == 0;
    long timeout_ms = strtol(fields[2], NULL, 10);
    long block_ms = strtol(fields[3], NULL, 10);
    int expect_timeout = strcmp(fields[4], "timeout") == 0;
    double budget = (double)timeout_ms + (per_call ? 0 : (double)block_ms) + SLACK_MS;

    char key[128];
    snprintf(key, sizeof key, "deadline-case:%s:%d:%d", name, (int)getpid(), serial);
    char *args[MAX_ARGS];
    int argc = 0;
    for (char *a = strtok(fields[5], " "); a && argc < MAX_ARGS; a = strtok(NULL, " ")) {
        const char *hole = strstr(a, "{key}");
        if (hole) {
            size_t size = strlen(a) + strlen(key) + 1;
            args[argc] = malloc(size);
            snprintf(args[argc], size, "%.*s%s%s", (int)(hole - a), a, key, hole + strlen("{key}"));
        } else {
            args[argc] = strdup(a);
        }
        argc++;
    }

    sr_client_t *c = open_client(url, per_call ? LONG_DEFAULT_MS : timeout_ms);
    long before = blocked_clients(observer);
    sr_reply_t *reply = NULL;
    sr_error_t *err = NULL;
    double start = now_ms();
    int rc;
    if (per_call) {
        sr_call_options_t opts;
        memset(&opts, 0, sizeof opts);
        opts.timeout_ms = (uint64_t)timeout_ms;
        rc = sr_client_execute_blocking_with(c, (size_t)argc, (const char *const *)args, NULL, &opts, &reply, &err);
    } else {
        rc = sr_client_execute_blocking(c, (size_t)argc, (const char *const *)args, NULL, &reply, &err);
    }
    double took = now_ms() - start;

    const char *wrong = NULL;
    if (took > budget) wrong = "ended after its deadline + slack";
    else if (expect_timeout && rc != SR_ERR_TIMEOUT) wrong = "expected SR_ERR_TIMEOUT";
    else if (!expect_timeout && (rc != SR_OK || sr_reply_type(reply) != SR_REPLY_NIL)) wrong = "expected a nil reply";
    if (!wrong) {
        /* Wait (bounded) for the server to unblock the timed-out command's connection. */
        double until = now_ms() + 5000;
        long blocked;
        while ((blocked = blocked_clients(observer)) > before && now_ms() < until) usleep(20000);
        if (blocked > before) wrong = "the server still blocks a client 5 s later";
    }
    if (wrong) {
        printf("FAIL %s: %s (rc %d %s, %.0f ms, allowed %.0f ms)\n", name, wrong, rc, sr_error_code_name(rc), took, budget);
        failed++;
    } else {
        printf("ok   %s (%.0f ms)\n", name, took);
        passed++;
    }
    sr_reply_free(reply);
    sr_error_free(err);
    sr_client_free(c);
    for (int i = 0; i < argc; i++) free(args[i]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s /path/to/sr-topology\n", argv[0]);
        return 2;
    }
    FILE *cases = fopen(SR_CASES_FILE, "r");
    if (!cases) {
        perror(SR_CASES_FILE);
        return 2;
    }
    (void)topo_cmd; /* no control commands: the topology stays as it starts */
    topo_t topo;
    if (topo_start(&topo, argv[1]) != 0) {
        fprintf(stderr, "sr-topology did not start\n");
        return 2;
    }
    sr_client_t *observer = open_client(topo.url, 5000);
    char line[1024];
    int serial = 0;
    while (fgets(line, sizeof line, cases)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#') continue;
        run_case(topo.url, observer, line, serial++);
    }
    fclose(cases);
    if (serial == 0) {
        printf("FAIL no cases in %s\n", SR_CASES_FILE);
        failed++;
    }
    sr_client_free(observer);
    topo_stop(&topo);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
