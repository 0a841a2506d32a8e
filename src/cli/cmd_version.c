/* cmd_version: `dyno version` — sends {"fn":"getVersion"} and prints the reply unchanged
 * (docs/design/cli.md#version). */
#include "cli/cmd.h"

static int version_prepare(const struct cli_args *a, struct cmd_req *req, char *err,
                           size_t errcap)
{
    (void)a;
    (void)err;
    (void)errcap;
    cli_buf_puts(&req->body, "{\"fn\":\"getVersion\"}");
    return req->body.err;
}

const struct cli_cmd cmd_version = {
    .name = "version",
    .about = "Print the daemon's version",
    .flags = NULL,
    .nflags = 0,
    .prepare = version_prepare,
    .render = cmd_render_verbatim,
};
