/* fuzz_daemon_flags: dynolog's command line and flagfiles (flags.c). The input up to the
 * first "\n--\n" is the flagfile text (written to a private file); the rest, split on '\n', is
 * argv, with "@F" standing for that flagfile's path. Invariants: no fault or hang, a failure
 * always comes with a one-line message, and strings stay NUL-terminated. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/flags.h"

const char *const fuzz_seeds[] = {
    "--port=1778\n--enable_ipc_monitor\n# comment\n\n--use_JSON=true\n--\n--flagfile=@F\n--v\n2",
    "--rpc_max_clients=0\n--\n--flagfile\n@F\n--certs_dir=/tmp",
    "--flagfile=@F\n--\n--flagfile=@F",
    "--ipc_socket_mode=0777\n--noenable_ipc_monitor\n--registry_gc_age_ms=9223372036854775807\n--\n@F\n--port\n-1",
    "--enable_gpu_monitor\n--dcgm_fields\nx\n--\n--nouse_prometheus\n--help=maybe\n--unknown_flag=1",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

#define MAX_ARGS 64

static char path[64];

static void cleanup(void)
{
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text, *argv[MAX_ARGS + 1], *sep;
    int argc = 1;
    if (!path[0]) {
        log_set_level(LOG_LVL_FATAL);
        snprintf(path, sizeof(path), "/tmp/fuzz_flags.%d", (int)getpid());
        atexit(cleanup);
    }
    text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    sep = strstr(text, "\n--\n");
    const char *args = sep ? sep + 4 : text;
    static char ffarg[80];
    snprintf(ffarg, sizeof(ffarg), "--flagfile=%s", path);
    if (sep)
        *sep = '\0';
    /* the flagfile: "--flagfile=@F" lines nest it into itself (the depth cap); any other
     * flagfile name is skipped, so the target never reads (or blocks on) files of the host */
    FILE *fp = fopen(path, "w");
    if (!fp)
        abort();
    for (char *line = sep ? text : NULL; line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strstr(line, "flagfile") && strcmp(line, "--flagfile=@F") != 0)
            goto skip;
        fprintf(fp, "%s\n", strcmp(line, "--flagfile=@F") == 0 ? ffarg : line);
        line = nl ? nl + 1 : NULL;
    }
    fclose(fp);
    fp = NULL;
    argv[0] = "dynolog";
    for (char *rest = (char *)args; rest && argc < MAX_ARGS;) {
        char *nl = strchr(rest, '\n');
        if (nl)
            *nl = '\0';
        /* a bare --flagfile takes the next argument: only "@F" may follow */
        bool bare = strcmp(rest, "--flagfile") == 0 || strcmp(rest, "-flagfile") == 0;
        if (strstr(rest, "flagfile") && !bare && strcmp(rest, "--flagfile=@F") != 0)
            goto skip;
        if (bare && (!nl || strncmp(nl + 1, "@F", 2) != 0 || (nl[3] != '\n' && nl[3] != '\0')))
            goto skip;
        if (strcmp(rest, "@F") == 0)
            argv[argc++] = path;
        else if (strcmp(rest, "--flagfile=@F") == 0)
            argv[argc++] = ffarg;
        else
            argv[argc++] = rest;
        rest = nl ? nl + 1 : NULL;
    }
    argv[argc] = NULL;
    struct daemon_flags *f = malloc(sizeof(*f));
    char err[2048];
    if (!f)
        abort();
    flags_defaults(f);
    err[0] = '\0';
    if (flags_parse(argc, argv, f, err, sizeof(err)) != 0) {
        if (!err[0] || !memchr(err, '\0', sizeof(err)))
            abort();
    } else if (!memchr(f->certs_dir, '\0', sizeof(f->certs_dir)) ||
               !memchr(f->ipc_socket_dir, '\0', sizeof(f->ipc_socket_dir))) {
        abort();
    }
    free(f);
skip:
    if (fp)
        fclose(fp);
    free(text);
    return 0;
}
