/* The C tests' checks: CHECK and CHECK_RC end the current test function (a void function) and
 * count a failure in failures_in_test, which each test's runner reads and resets; now_ms() is a
 * monotonic clock in milliseconds. */
#ifndef SR_TEST_CHECK_H
#define SR_TEST_CHECK_H

#include <stdio.h>
#include <time.h>

#include "sentinel_recovery.h"

static int failures_in_test;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "    %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures_in_test++;                                                           \
            return;                                                                       \
        }                                                                                 \
    } while (0)

#define CHECK_RC(rc, want)                                                                   \
    do {                                                                                     \
        int rc_ = (rc);                                                                      \
        if (rc_ != (want)) {                                                                 \
            fprintf(stderr, "    %s:%d: %s gave %d (%s), want %d\n", __FILE__, __LINE__, #rc, \
                    rc_, sr_error_code_name(rc_), want);                                     \
            failures_in_test++;                                                              \
            return;                                                                          \
        }                                                                                    \
    } while (0)

/* inline: a test that does not use it gets no unused-function warning. */
static inline long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

#endif
