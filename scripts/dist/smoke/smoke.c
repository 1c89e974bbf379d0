/* make test-dist: the C SDK (pkg-config or CMake, shared or static) through a kill -9 failover.
 *
 *   smoke URL EXPECTED_VERSION NAME
 *
 * Connects, SET, GET, prints READY (the test then kill -9s the primary), waits for a
 * primary_changed event with an old primary, GETs again and prints OK. Exit status 0 only when
 * all of that happened. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sentinel_recovery.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int switched;
static char old_primary[300], new_primary[300];

static void on_event(void *user_data, const sr_event_t *ev) {
    (void)user_data;
    if (ev->kind != SR_EVENT_PRIMARY_CHANGED || ev->old_primary == NULL) return;
    pthread_mutex_lock(&mu);
    snprintf(old_primary, sizeof old_primary, "%s:%u", ev->old_primary->host, ev->old_primary->port);
    snprintf(new_primary, sizeof new_primary, "%s:%u", ev->address->host, ev->address->port);
    switched = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static int run(sr_client_t *client, size_t argc, const char **argv, const char *expect, const char *what) {
    sr_reply_t *reply = NULL;
    sr_error_t *err = NULL;
    const uint8_t *data;
    size_t len;
    int rc = sr_client_execute_blocking(client, argc, argv, NULL, &reply, &err);
    if (rc != SR_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, sr_error_code_name(rc), sr_error_get_message(err));
        sr_error_free(err);
        return 1;
    }
    if (expect != NULL) {
        if (sr_reply_bytes(reply, &data, &len) != SR_OK || len != strlen(expect) ||
            memcmp(data, expect, len) != 0) {
            fprintf(stderr, "%s: unexpected reply\n", what);
            sr_reply_free(reply);
            return 1;
        }
    }
    sr_reply_free(reply);
    return 0;
}

int main(int argc, char **argv) {
    sr_client_t *client = NULL;
    sr_error_t *err = NULL;
    struct timespec deadline;
    int rc, seen;
    const char *value = "from the C SDK";
    char key[64];

    if (argc < 4) {
        fprintf(stderr, "usage: %s URL EXPECTED_VERSION NAME\n", argv[0]);
        return 2;
    }
    if (strcmp(sr_version(), argv[2]) != 0) {
        fprintf(stderr, "sr_version() %s != %s\n", sr_version(), argv[2]);
        return 1;
    }
    snprintf(key, sizeof key, "dist:c:%s", argv[3]);
    const char *set[] = {"SET", key, value};
    const char *get[] = {"GET", key};

    rc = sr_client_open(argv[1], NULL, 0, &client, &err);
    if (rc == SR_OK) rc = sr_client_wait_ready(client, NULL, &err);
    if (rc != SR_OK) {
        fprintf(stderr, "connect: %s: %s\n", sr_error_code_name(rc), sr_error_get_message(err));
        sr_error_free(err);
        sr_client_free(client);
        return 1;
    }
    sr_client_set_event_callback(client, on_event, NULL);
    if (run(client, 3, set, NULL, "SET") || run(client, 2, get, value, "GET")) {
        sr_client_free(client);
        return 1;
    }
    printf("READY c-%s %s\n", argv[3], sr_version());
    fflush(stdout);

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 90;
    pthread_mutex_lock(&mu);
    while (!switched)
        if (pthread_cond_timedwait(&cv, &mu, &deadline)) break;
    seen = switched;
    pthread_mutex_unlock(&mu);
    if (!seen) {
        fprintf(stderr, "no primary_changed within 90 s\n");
        sr_client_free(client);
        return 1;
    }
    printf("SWITCH %s -> %s\n", old_primary, new_primary);
    rc = run(client, 2, get, value, "GET after the failover");
    sr_client_close(client);
    sr_client_free(client);
    if (rc) return 1;
    printf("OK c-%s\n", argv[3]);
    return 0;
}
