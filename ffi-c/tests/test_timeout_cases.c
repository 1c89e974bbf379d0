/* The shared per-call timeout cases (tests/cases/timeouts.tsv; the rule lives in the core's
 * deadline module): each value as sr_call_options_t.timeout_ms of a GET
 * (sr_client_execute_blocking_with) and of a one-command pipeline
 * (sr_client_pipeline_blocking), after sr_call_timeout_ms() (the rule for a timeout held in a
 * double) judged it. Accepted: the call answers; refused: SR_ERR_CONFIG with a message starting
 * "timeout must be". A uint64_t timeout_ms holds no fraction, negative, NaN or inf: those
 * cases reach the calls through sr_call_timeout_ms() only. 0 is refused by the rule; in the
 * options struct it means "not set" (the client's default).
 *
 * Usage: test_timeout_cases /path/to/sr-topology   (SR_TIMEOUT_CASES_FILE is set at compile time)
 * Prints one line per case and a closing "N passed, N failed"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentinel_recovery.h"
#include "cases.h"
#include "topology.h"

#ifndef SR_TIMEOUT_CASES_FILE
#error "compile with -DSR_TIMEOUT_CASES_FILE=\"/path/to/tests/cases/timeouts.tsv\""
#endif

static int passed, failed;

enum expect { ANSWERS, ACCEPTED, REFUSED };

/* What one call gave against the case: answers, SR_OK with a nil reply; accepted, that or
 * SR_ERR_TIMEOUT (a deadline too short for a busy machine); refused, SR_ERR_CONFIG with the
 * rule's message. */
static void check_outcome(const char *what, int rc, int is_nil, sr_error_t *err, enum expect expect) {
    const char *message = err ? sr_error_get_message(err) : "";
    int ok = expect == REFUSED ? (rc == SR_ERR_CONFIG && strncmp(message, "timeout must be", 15) == 0)
                               : ((rc == SR_OK && is_nil) || (expect == ACCEPTED && rc == SR_ERR_TIMEOUT));
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s: rc %d (%s) %s\n", what, rc, sr_error_code_name(rc), message);
    }
}

/* A GET and a one-command pipeline with `timeout_ms` as the call's own timeout. */
static void run_calls(sr_client_t *c, const char *value, const char *why, uint64_t timeout_ms, enum expect accepted) {
    sr_call_options_t options = {0};
    options.timeout_ms = timeout_ms;
    const char *argv[] = {"GET", "timeout-case:absent"};
    sr_reply_t *reply = NULL;
    sr_error_t *err = NULL;
    int rc = sr_client_execute_blocking_with(c, 2, argv, NULL, &options, &reply, &err);
    char what[160];
    snprintf(what, sizeof what, "%s ms, execute (%s)", value, why);
    check_outcome(what, rc, rc == SR_OK && sr_reply_type(reply) == SR_REPLY_NIL, err, accepted);
    sr_reply_free(reply);
    sr_error_free(err);

    sr_command_t cmd = {2, argv, NULL};
    sr_results_t *results = NULL;
    err = NULL;
    rc = sr_client_pipeline_blocking(c, &cmd, 1, &options, &results, &err);
    int nil = 0;
    if (rc == SR_OK && sr_results_len(results) == 1) {
        const sr_reply_t *first = sr_results_reply(results, 0);
        nil = first != NULL && sr_reply_type(first) == SR_REPLY_NIL;
    }
    snprintf(what, sizeof what, "%s ms, pipeline (%s)", value, why);
    check_outcome(what, rc, nil, err, accepted);
    sr_results_free(results);
    sr_error_free(err);
}

/* The rule through sr_call_timeout_ms() for every case; then the calls, with the whole
 * milliseconds it gave, or with the value itself when a uint64_t holds it (not 0, which the
 * options struct reads as "not set"). */
static void run_case(void *client, char *line) {
    sr_client_t *c = client;
    char *value = strtok(line, "\t");
    char *expect = strtok(NULL, "\t");
    char *why = strtok(NULL, "\t");
    if (!value || !expect || !why) {
        printf("FAIL malformed case line\n");
        failed++;
        return;
    }
    enum expect accepted = strcmp(expect, "answers") == 0 ? ANSWERS : strcmp(expect, "accepted") == 0 ? ACCEPTED : REFUSED;
    double ms = strtod(value, NULL);
    uint64_t whole = 0;
    sr_error_t *err = NULL;
    int rc = sr_call_timeout_ms(ms, &whole, &err);
    char what[160];
    snprintf(what, sizeof what, "%s ms, sr_call_timeout_ms (%s)", value, why);
    /* The rule alone: a timeout, never a call's outcome. */
    check_outcome(what, rc, rc == SR_OK && whole >= 1, err, accepted == REFUSED ? REFUSED : ANSWERS);
    sr_error_free(err);
    if (rc == SR_OK) {
        run_calls(c, value, why, whole, accepted);
    } else if (isfinite(ms) && ms >= 1 && ms == floor(ms)) {
        run_calls(c, value, why, (uint64_t)ms, accepted);
    }
    printf("ok   %s ms %s\n", value, expect);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s /path/to/sr-topology\n", argv[0]);
        return 2;
    }
    (void)topo_cmd; /* no control commands: the topology stays as it starts */
    topo_t topo;
    if (topo_start(&topo, argv[1]) != 0) {
        fprintf(stderr, "sr-topology did not start\n");
        return 2;
    }
    sr_client_t *c = NULL;
    sr_error_t *err = NULL;
    if (sr_client_open(topo.url, NULL, 0, &c, &err) != SR_OK || sr_client_wait_ready(c, NULL, &err) != SR_OK) {
        fprintf(stderr, "open %s: %s\n", topo.url, err ? sr_error_get_message(err) : "?");
        return 2;
    }
    int n = for_each_case(SR_TIMEOUT_CASES_FILE, run_case, c);
    if (n < 8) {
        printf("FAIL %d cases in %s\n", n, SR_TIMEOUT_CASES_FILE);
        failed++;
    }
    sr_client_free(c);
    topo_stop(&topo);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
