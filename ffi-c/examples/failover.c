/* failover: follow a Redis/Valkey primary through Sentinel and print the switch.
 *
 *   failover 'redis+sentinel://127.0.0.1:26379/mymaster' [TIMEOUT_SECONDS]
 *
 * Opens a client, prints the topology, installs an event callback, waits for a primary_changed
 * event (trigger one with SENTINEL FAILOVER or by killing the primary), prints the switch and
 * closes. Exit status 0 when a switch was seen, 1 otherwise.
 *
 * Build: cc -std=c11 failover.c $(pkg-config --cflags --libs sentinel_recovery) -o failover */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sentinel_recovery.h"

/* What the callback copies out of the (borrowed) event for the main thread. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int switched;
static char old_primary[300], new_primary[300];

/* Runs on a library thread: copy and return quickly. */
static void on_event(void *user_data, const sr_event_t *ev) {
    (void)user_data;
    printf("event: %s\n", ev->json);
    fflush(stdout);
    if (ev->kind != SR_EVENT_PRIMARY_CHANGED || ev->old_primary == NULL) return;
    pthread_mutex_lock(&mu);
    snprintf(old_primary, sizeof old_primary, "%s:%u", ev->old_primary->host, ev->old_primary->port);
    snprintf(new_primary, sizeof new_primary, "%s:%u", ev->address->host, ev->address->port);
    switched = 1;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
}

static void print_topology(const sr_topology_t *t) {
    printf("service %s (epoch %llu, %s)\n", t->service, (unsigned long long)t->epoch,
           t->healthy ? "healthy" : "unhealthy");
    if (t->primary) printf("  primary   %s:%u\n", t->primary->host, t->primary->port);
    for (size_t i = 0; i < t->replicas_len; i++)
        printf("  replica   %s:%u\n", t->replicas[i].host, t->replicas[i].port);
    for (size_t i = 0; i < t->sentinels_len; i++)
        printf("  sentinel  %s:%u%s\n", t->sentinels[i].host, t->sentinels[i].port,
               t->sentinels[i].up ? "" : " (down)");
}

int main(int argc, char **argv) {
    sr_client_t *client = NULL;
    sr_topology_t *topology = NULL;
    sr_error_t *err = NULL;
    struct timespec deadline;
    int rc, seen;

    if (argc < 2) {
        fprintf(stderr, "usage: %s URL [TIMEOUT_SECONDS]\n", argv[0]);
        return 2;
    }
    printf("sentinel-recovery %s\n", sr_version());
    rc = sr_client_open(argv[1], NULL, 0, &client, &err);
    if (rc != SR_OK) {
        fprintf(stderr, "open: %s: %s\n", sr_error_code_name(rc), sr_error_get_message(err));
        sr_error_free(err);
        return 1;
    }
    rc = sr_client_wait_ready(client, &topology, &err);
    if (rc != SR_OK) {
        fprintf(stderr, "discovery: %s: %s\n", sr_error_code_name(rc), sr_error_get_message(err));
        sr_error_free(err);
        sr_client_free(client);
        return 1;
    }
    print_topology(topology);
    sr_topology_free(topology);

    sr_client_set_event_callback(client, on_event, NULL);
    printf("waiting for a primary change\n");
    fflush(stdout);

    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += argc > 2 ? atoi(argv[2]) : 120;
    pthread_mutex_lock(&mu);
    while (!switched)
        if (pthread_cond_timedwait(&cv, &mu, &deadline)) break;
    seen = switched;
    if (seen) printf("primary switched: %s -> %s\n", old_primary, new_primary);
    pthread_mutex_unlock(&mu);
    if (!seen) printf("no primary change seen\n");

    /* After close returns, no callback runs: the callback's state can go away. */
    sr_client_close(client);
    sr_client_free(client);
    return seen ? 0 : 1;
}
