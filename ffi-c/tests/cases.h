/* The shared cases files (tests/cases/, which every binding's suite reads) for the C tests:
 * for_each_case() calls `run` with each line that is neither blank nor a comment (without its
 * line end; `run` may cut it up) and returns how many it ran, or -1 when the file can't be read. */
#ifndef SR_TEST_CASES_H
#define SR_TEST_CASES_H

#include <stdio.h>
#include <string.h>

static inline int for_each_case(const char *path, void (*run)(void *ctx, char *line), void *ctx) {
    FILE *file = fopen(path, "r");
    if (!file) {
        perror(path);
        return -1;
    }
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, file)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#') continue;
        run(ctx, line);
        n++;
    }
    fclose(file);
    return n;
}

#endif
