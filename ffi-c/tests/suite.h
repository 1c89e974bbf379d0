/* The runner the C suites share: the tests that need no server, then the topology, then the
 * tests that need it, each printed as "ok   NAME" or "FAIL NAME" as it ends (the live ones with
 * their time), then "N passed, M failed". The topology is stopped by the runner, also when a test
 * failed; a topology that does not start fails the run. */
#ifndef SR_TEST_SUITE_H
#define SR_TEST_SUITE_H

#include <stdio.h>

#include "check.h"
#include "topology.h"

typedef struct {
    const char *name;
    void (*fn)(void);
} test_t;

/* Runs `offline`, starts `*topo` from the sr-topology binary in argv[1], runs `live`, stops it.
 * Returns the process's exit code: 0 all passed, 1 a failure, 2 no sr-topology given. */
static inline int run_suite(int argc, char **argv, topo_t *topo, const test_t *offline, size_t n_offline,
                            const test_t *live, size_t n_live) {
    int passed = 0, failed = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: %s /path/to/sr-topology\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < n_offline; i++) {
        failures_in_test = 0;
        offline[i].fn();
        printf("%s %s\n", failures_in_test ? "FAIL" : "ok  ", offline[i].name);
        failures_in_test ? failed++ : passed++;
    }
    if (topo_start(topo, argv[1]) != 0) {
        fprintf(stderr, "could not start the topology\n");
        topo_stop(topo);
        return 1;
    }
    printf("topology up: %s\n", topo->url);
    for (size_t i = 0; i < n_live; i++) {
        failures_in_test = 0;
        long start = now_ms();
        live[i].fn();
        printf("%s %s (%ld ms)\n", failures_in_test ? "FAIL" : "ok  ", live[i].name, now_ms() - start);
        failures_in_test ? failed++ : passed++;
    }
    topo_stop(topo);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#define RUN_SUITE(argc, argv, topo, offline, live) \
    run_suite(argc, argv, topo, offline, sizeof offline / sizeof *offline, live, sizeof live / sizeof *live)

#endif
