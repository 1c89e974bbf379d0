/* The shared per-call timeout cases (tests/cases/timeouts.tsv; the rule lives in the core's
 * deadline module): each value as sr_call_options_t.timeout_ms of a GET
 * (sr_client_execute_blocking_with) and of a one-command pipeline
 * (sr_client_pipeline_blocking). Accepted: the call answers; refused: SR_ERR_CONFIG with a
 * message starting "timeout must be". timeout_ms is a uint64_t, so fractions, negatives, NaN
 * and inf cannot be given (skipped, saying so), and 0 is the struct's "not set": the client's
 * default, so C runs the 0 case as accepted.
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
#include "topology.h"

#ifndef SR_TIMEOUT_CASES_FILE
#error "compile with -DSR_TIMEOUT_CASES_FILE=\"/path/to/tests/cases/timeouts.tsv\""
#endif

static int passed, failed, skipped;

/* What one blocking call gave: SR_OK with a nil reply, or the error code with the message. */
static void check_outcome(const char *what, int rc, int is_nil, sr_error_t *err, int accepted) {
    const char *message = err ? sr_error_get_message(err) : "";
    int ok = accepted ? (rc == SR_OK && is_nil)
                      : (rc == SR_ERR_CONFIG && strncmp(message, "timeout must be", 15) == 0);
    if (ok) {
        passed++;
    } else {
        failed++;
        printf("FAIL %s: rc %d (%s) %s\n", what, rc, sr_error_code_name(rc), message);
    }
}

static void run_case(sr_client_t *c, char *line) {
    char *value = strtok(line, "\t");
    char *expect = strtok(NULL, "\t");
    char *why = strtok(NULL, "\t");
    if (!value || !expect || !why) {
        printf("FAIL malformed case line\n");
        failed++;
        return;
    }
    int accepted = strcmp(expect, "accepted") == 0;
    double ms = strtod(value, NULL);
    if (!isfinite(ms) || ms < 0 || ms != floor(ms)) {
        printf("skip %s: a uint64_t timeout_ms cannot hold it (%s)\n", value, why);
        skipped++;
        return;
    }
    if (ms == 0) {
        printf("note %s: 0 is C's \"not set\" (the client's default), so it runs as accepted\n", value);
        accepted = 1;
    }
    sr_call_options_t options = {0};
    options.timeout_ms = (uint64_t)ms;

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
    printf("ok   %s ms %s\n", value, accepted ? "accepted" : "refused");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s /path/to/sr-topology\n", argv[0]);
        return 2;
    }
    FILE *cases = fopen(SR_TIMEOUT_CASES_FILE, "r");
    if (!cases) {
        perror(SR_TIMEOUT_CASES_FILE);
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
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, cases)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#') continue;
        run_case(c, line);
        n++;
    }
    fclose(cases);
    if (n < 8) {
        printf("FAIL %d cases in %s\n", n, SR_TIMEOUT_CASES_FILE);
        failed++;
    }
    sr_client_free(c);
    topo_stop(&topo);
    printf("%d skipped\n", skipped);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
