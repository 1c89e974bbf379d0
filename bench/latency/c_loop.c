/* c_loop: sequential GET through the C ABI (sr_client_execute_blocking), one command at a time.
 *
 *   c_loop URL N          open, wait for the primary, N GETs; prints "µs/op" (used by callgrind.sh)
 *   c_loop --serve URL    worker for run.py: prints one JSON line when ready, then for each stdin
 *                         line "run N WARMUP" does WARMUP untimed GETs and N timed ones and prints
 *                         {"total_ns":T,"lat_ns":[...]}; "quit" (or EOF) closes and exits.
 *   c_loop --threads ...  as above, and prints the process's threads (tid, name) to stderr at the end
 *
 * The key is KEY (worker.h). Build: see mk/bench.mk. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sentinel_recovery.h"
#include "worker.h"

static sr_client_t *client;
static const char *const argv_get[2] = {"GET", KEY};
static const size_t argv_len[2] = {3, sizeof KEY - 1};

static void die(const char *what, int rc, sr_error_t *err) {
    fprintf(stderr, "c_loop: %s failed: %d %s\n", what, rc,
            err ? sr_error_get_message(err) : sr_error_message(rc));
    exit(1);
}

static void get_once(void) {
    sr_reply_t *reply = NULL;
    sr_error_t *err = NULL;
    int rc = sr_client_execute_blocking(client, 2, argv_get, argv_len, &reply, &err);
    if (rc != SR_OK) die("GET", rc, err);
    sr_reply_free(reply);
}

static void open_client(const char *url) {
    sr_error_t *err = NULL;
    int rc = sr_client_open(url, NULL, 0, &client, &err);
    if (rc != SR_OK) die("sr_client_open", rc, err);
    rc = sr_client_wait_ready(client, NULL, &err);
    if (rc != SR_OK) die("sr_client_wait_ready", rc, err);
}

static void print_threads(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    if (!d) return;
    while ((e = readdir(d)) != NULL) {
        char path[300], name[64] = "";
        FILE *f;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        f = fopen(path, "r");
        if (f) {
            if (fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
            fclose(f);
        }
        fprintf(stderr, "thread %s %s\n", e->d_name, name);
    }
    closedir(d);
}

static int serve(const char *url) {
    open_client(url);
    int rc = serve_rounds(get_once);
    sr_client_free(client);
    return rc;
}

int main(int argc, char **argv) {
    int threads = 0, rc;
    if (argc > 1 && strcmp(argv[1], "--threads") == 0) {
        threads = 1;
        argc--;
        argv++;
    }
    if (argc == 3 && strcmp(argv[1], "--serve") == 0) {
        rc = serve(argv[2]);
        if (threads) print_threads();
        return rc;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: c_loop [--threads] URL N | c_loop [--threads] --serve URL\n");
        return 2;
    }
    unsigned long n = strtoul(argv[2], NULL, 10);
    open_client(argv[1]);
    uint64_t t0 = now_ns();
    for (unsigned long i = 0; i < n; i++) get_once();
    uint64_t total = now_ns() - t0;
    printf("%lu GETs, %.2f us/op\n", n, n ? (double)total / 1e3 / (double)n : 0.0);
    if (threads) print_threads();
    sr_client_free(client);
    return 0;
}
