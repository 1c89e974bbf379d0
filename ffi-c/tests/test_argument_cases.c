/* The shared argument text cases (tests/cases/arguments.tsv; the policy lives in the core's
 * arguments module) through sr_argument_float_text(), the text .NET sends for its doubles and
 * floats: each float / float32 case gives its text, NaN SR_ERR_CONFIG naming the argument.
 * "int" cases are skipped: C formats its own integers (decimal, as every binding).
 *
 * Usage: test_argument_cases [ignored]   (SR_ARGUMENT_CASES_FILE is set at compile time)
 * Prints a closing "N passed, N failed"; exits non-zero on any failure. */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentinel_recovery.h"
#include "cases.h"

#ifndef SR_ARGUMENT_CASES_FILE
#error "compile with -DSR_ARGUMENT_CASES_FILE=\"/path/to/tests/cases/arguments.tsv\""
#endif

static int passed, failed;

static void fail(const char *line, const char *why) {
    failed++;
    printf("FAIL %s: %s\n", line, why);
}

static void run_case(void *unused, char *line) {
    (void)unused;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", line);
    char *kind = strtok(line, "\t");
    char *value = strtok(NULL, "\t");
    char *text = strtok(NULL, "\t");
    if (!kind || !value || !text) {
        fail(copy, "three tab-separated fields");
        return;
    }
    if (strcmp(kind, "int") == 0) return;
    double d = strcmp(value, "inf") == 0 ? INFINITY : strcmp(value, "-inf") == 0 ? -INFINITY
             : strcmp(value, "NaN") == 0 ? NAN : strtod(value, NULL);
    bool single = strcmp(kind, "float32") == 0;
    if (single) d = (float)d;
    char buf[32];
    size_t len = 99;
    sr_error_t *err = NULL;
    int rc = sr_argument_float_text(d, single, 1, buf, sizeof buf, &len, &err);
    if (strcmp(text, "refused") == 0) {
        if (rc != SR_ERR_CONFIG || !err || strcmp(sr_error_get_message(err), "argument 1 is NaN") != 0)
            fail(copy, "not refused as 'argument 1 is NaN'");
        else
            passed++;
    } else if (rc != SR_OK || len != strlen(text) || strcmp(buf, text) != 0) {
        fail(copy, rc == SR_OK ? buf : sr_error_get_message(err));
    } else {
        passed++;
    }
    sr_error_free(err);
}

int main(void) {
    if (for_each_case(SR_ARGUMENT_CASES_FILE, run_case, NULL) < 19) fail(SR_ARGUMENT_CASES_FILE, "fewer than 19 cases");
    /* A buffer too small is refused, not overrun. */
    char small[8];
    size_t len = 0;
    if (sr_argument_float_text(0.1, false, 1, small, sizeof small, &len, NULL) != SR_ERR_INVALID_ARGUMENT)
        fail("cap 8", "accepted a buffer below 32 bytes");
    else
        passed++;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
