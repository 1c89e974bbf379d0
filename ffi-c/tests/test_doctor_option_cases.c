/* The shared doctor option cases (tests/cases/doctor_options.tsv; the rule lives in the core's
 * doctor::Options::from_host): each case's watch_ms and pings through sr_doctor_options_t of
 * sr_doctor_blocking() against a real topology. Accepted: a report comes; refused: SR_ERR_CONFIG
 * naming the option. The zeroed struct reads 0 as "not set" (those cases run as accepted, said
 * so), and an int32_t pings holds no fraction (skipped, said so).
 *
 * Usage: test_doctor_option_cases /path/to/sr-topology   (SR_DOCTOR_OPTION_CASES_FILE is set at
 * compile time). Prints one line per case and a closing "N passed, N failed". */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentinel_recovery.h"
#include "cases.h"
#include "topology.h"

#ifndef SR_DOCTOR_OPTION_CASES_FILE
#error "compile with -DSR_DOCTOR_OPTION_CASES_FILE=\"/path/to/tests/cases/doctor_options.tsv\""
#endif

static int passed, failed;

static void run_case(void *topology_url, char *line) {
    const char *url = topology_url;
    char copy[128];
    snprintf(copy, sizeof copy, "%s", line);
    char *watch = strtok(line, "\t");
    char *pings = strtok(NULL, "\t");
    char *expect = strtok(NULL, "\t");
    if (!watch || !pings || !expect) {
        printf("FAIL %s: three tab-separated fields\n", copy);
        failed++;
        return;
    }
    int refused = strcmp(expect, "refused") == 0;
    sr_doctor_options_t options;
    memset(&options, 0, sizeof options);
    if (strcmp(watch, "-") != 0) options.watch_ms = strcmp(watch, "NaN") == 0 ? NAN : strtod(watch, NULL);
    if (strcmp(pings, "-") != 0) {
        double p = strtod(pings, NULL);
        if (p != floor(p)) {
            printf("skip %s: an int32_t pings cannot hold it\n", copy);
            return;
        }
        options.pings = (int32_t)p;
    }
    if (refused && options.watch_ms == 0 && options.pings == 0) {
        printf("note %s: 0 is the zeroed struct's \"not set\", so it runs as accepted\n", copy);
        refused = 0;
    }
    char *json = NULL;
    int exit_code = -1;
    sr_error_t *err = NULL;
    int rc = sr_doctor_blocking(url, NULL, 0, &options, &json, &exit_code, &err);
    const char *named = strcmp(watch, "-") != 0 ? "watch must be" : "pings must be";
    int ok = refused ? (rc == SR_ERR_CONFIG && err && strncmp(sr_error_get_message(err), named, strlen(named)) == 0)
                     : (rc == SR_OK && json != NULL && exit_code >= 0);
    if (ok) {
        passed++;
        printf("ok   %s\n", copy);
    } else {
        failed++;
        printf("FAIL %s: rc %d %s\n", copy, rc, err ? sr_error_get_message(err) : "");
    }
    sr_string_free(json);
    sr_error_free(err);
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
    int n = for_each_case(SR_DOCTOR_OPTION_CASES_FILE, run_case, topo.url);
    if (n < 10) {
        printf("FAIL %d cases in %s\n", n, SR_DOCTOR_OPTION_CASES_FILE);
        failed++;
    }
    topo_stop(&topo);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
