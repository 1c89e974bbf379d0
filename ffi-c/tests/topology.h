/* A real Redis + Sentinel topology for the C tests, run by the testkit's `sr-topology` binary.
 *
 * topo_start() spawns `sr-topology up --json` with its stdin and stdout on pipes and reads the
 * first JSON line. Control commands (`kill9 PORT`, `primary`, ...) are lines on its stdin, each
 * answered by one JSON line. topo_stop() sends `down`; if this process dies first, the pipe
 * closes and sr-topology stops on stdin EOF, so no server outlives a failed test. */
#ifndef SR_TEST_TOPOLOGY_H
#define SR_TEST_TOPOLOGY_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    FILE *in;  /* its stdin */
    FILE *out; /* its stdout */
    char url[512];
    int primary_port;
    char line[8192];
} topo_t;

/* The string value of "key":"..." in a JSON line (no escapes expected), into buf. */
static int topo_json_str(const char *json, const char *key, char *buf, size_t len) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(json, pat);
    if (!p) return -1;
    p += strlen(pat);
    const char *end = strchr(p, '"');
    if (!end || (size_t)(end - p) >= len) return -1;
    memcpy(buf, p, (size_t)(end - p));
    buf[end - p] = '\0';
    return 0;
}

/* The integer value of "key":N after the first occurrence of `after` (or anywhere if NULL). */
static long topo_json_int(const char *json, const char *after, const char *key) {
    const char *p = after ? strstr(json, after) : json;
    char pat[64];
    if (!p) return -1;
    snprintf(pat, sizeof pat, "\"%s\":", key);
    p = strstr(p, pat);
    if (!p) return -1;
    return strtol(p + strlen(pat), NULL, 10);
}

/* topo_start() with extra `sr-topology up` options (`extra` NULL-terminated, or NULL). */
static inline int topo_start_with(topo_t *t, const char *bin, const char *const *extra) {
    int to_child[2], from_child[2];
    memset(t, 0, sizeof *t);
    if (pipe(to_child) || pipe(from_child)) return -1;
    fflush(NULL);
    t->pid = fork();
    if (t->pid < 0) return -1;
    if (t->pid == 0) {
        dup2(to_child[0], 0);
        dup2(from_child[1], 1);
        close(to_child[0]);
        close(to_child[1]);
        close(from_child[0]);
        close(from_child[1]);
        const char *args[32] = {bin, "up", "--json"};
        int n = 3;
        for (; extra && *extra && n < 31; extra++) args[n++] = *extra;
        args[n] = NULL;
        execv(bin, (char *const *)args);
        fprintf(stderr, "topology: cannot run %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    t->in = fdopen(to_child[1], "w");
    t->out = fdopen(from_child[0], "r");
    if (!t->in || !t->out || !fgets(t->line, sizeof t->line, t->out)) {
        fprintf(stderr, "topology: sr-topology did not start\n");
        return -1;
    }
    if (topo_json_str(t->line, "url", t->url, sizeof t->url)) return -1;
    t->primary_port = (int)topo_json_int(t->line, "\"primary\"", "port");
    return t->primary_port > 0 ? 0 : -1;
}

static inline int topo_start(topo_t *t, const char *bin) { return topo_start_with(t, bin, NULL); }

/* Sends one control line and reads its one-line JSON answer into t->line; 0 if "ok":true. */
static int topo_cmd(topo_t *t, const char *command) {
    if (fprintf(t->in, "%s\n", command) < 0 || fflush(t->in)) return -1;
    if (!fgets(t->line, sizeof t->line, t->out)) return -1;
    return strstr(t->line, "\"ok\":true") ? 0 : -1;
}

static void topo_stop(topo_t *t) {
    int status;
    if (!t->pid) return;
    if (t->in) {
        fprintf(t->in, "down\n");
        fclose(t->in);
    }
    if (t->out) fclose(t->out);
    waitpid(t->pid, &status, 0);
    t->pid = 0;
}

#endif
