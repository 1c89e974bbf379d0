/* The soak's C writer (see tests/src/bin/sr-soak/writer.rs for the loop and log format).
 * Usage: writer URL ID LOG STOPFILE READS(0|1) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sentinel_recovery.h"

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Writes `s` as a JSON string (quotes and control characters escaped). */
static void json_string(FILE *f, const char *s, size_t len) {
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void call(sr_client_t *client, FILE *log, const char *id, const char *op, long long v,
                 int argc, const char **argv) {
    uint64_t t0 = now_ms();
    sr_reply_t *reply = NULL;
    sr_error_t *error = NULL;
    int rc = sr_client_execute_blocking(client, (size_t)argc, argv, NULL, &reply, &error);
    uint64_t t1 = now_ms();
    fprintf(log, "{\"w\":\"%s\",\"op\":\"%s\",\"v\":", id, op);
    if (v >= 0) fprintf(log, "%lld", v); else fputs("null", log);
    fprintf(log, ",\"t0\":%" PRIu64 ",\"t1\":%" PRIu64 ",\"ok\":%s,\"reply\":", t0, t1,
            rc == SR_OK ? "true" : "false");
    int64_t n = 0;
    size_t len = 0;
    if (rc == SR_OK && sr_reply_integer(reply, &n) == SR_OK) {
        fprintf(log, "%" PRId64, n);
    } else if (rc == SR_OK && sr_reply_type(reply) == SR_REPLY_BULK) {
        const uint8_t *b = NULL;
        if (sr_reply_bytes(reply, &b, &len) != SR_OK || b == NULL) len = 0;
        json_string(log, b ? (const char *)b : "", len);
    } else {
        fputs("null", log);
    }
    fputs(",\"err\":", log);
    if (rc == SR_OK) {
        fputs("null", log);
    } else {
        char text[512];
        const char *msg = error ? sr_error_get_message(error) : "";
        snprintf(text, sizeof text, "%s: %s", sr_error_code_name(rc), msg ? msg : "");
        json_string(log, text, strlen(text));
    }
    fputs("}\n", log);
    fflush(log);
    sr_reply_free(reply);
    sr_error_free(error);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: writer URL ID LOG STOPFILE READS(0|1)\n");
        return 2;
    }
    const char *id = argv[2], *stop = argv[4];
    int reads = strcmp(argv[5], "1") == 0;
    FILE *log = fopen(argv[3], "w");
    if (!log) { perror(argv[3]); return 1; }
    sr_client_t *client = NULL;
    sr_error_t *error = NULL;
    if (sr_client_open(argv[1], NULL, 0, &client, &error) != SR_OK) {
        fprintf(stderr, "writer: %s\n", error ? sr_error_get_message(error) : "open failed");
        return 1;
    }
    char list[128], counter[128], value[32];
    snprintf(list, sizeof list, "soak:l:%s", id);
    snprintf(counter, sizeof counter, "soak:c:%s", id);
    for (long long seq = 1; access(stop, F_OK) != 0; seq++) {
        snprintf(value, sizeof value, "%lld", seq);
        const char *rpush[] = {"RPUSH", list, value};
        const char *incr[] = {"INCR", counter};
        const char *get[] = {"GET", counter};
        call(client, log, id, "rpush", seq, 3, rpush);
        call(client, log, id, "incr", -1, 2, incr);
        if (reads) call(client, log, id, "get", -1, 2, get);
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    sr_client_close(client);
    sr_client_free(client);
    fclose(log);
    return 0;
}
