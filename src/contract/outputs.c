/* outputs: lookups over the output table (outputs.h). Pure; shared by the CLI and the plugin. */
#include "contract/outputs.h"

#include <ctype.h>
#include <errno.h>
#include <strings.h>

struct out_row {
    const char *name, *value;
    bool exportable;
};

#define OUT_ROW_(id, stem, sel, value, help) [MSMON_OUTPUT_##id] = { #stem, value, OUT_SEL_##sel },
#define OUT_SEL_E true
#define OUT_SEL_N false
static const struct out_row out_rows[MSMON_OUTPUT_COUNT] = { MSMON_OUTPUT_TABLE(OUT_ROW_) };

const char *outputs_name(enum msmon_output id)
{
    return (unsigned)id < MSMON_OUTPUT_COUNT ? out_rows[id].name : NULL;
}

int outputs_export_parse(const char *value, enum msmon_output *ret)
{
    for (unsigned i = 0; value && i < MSMON_OUTPUT_COUNT; i++) {
        if (out_rows[i].exportable && strcasecmp(value, out_rows[i].value) == 0) {
            *ret = (enum msmon_output)i;
            return 0;
        }
    }
    return -EINVAL;
}

void outputs_export_rule(char *buf, size_t cap)
{
    size_t o = 0;

    if (!cap)
        return;
    for (unsigned i = 0; i < MSMON_OUTPUT_COUNT; i++) {
        if (!out_rows[i].exportable)
            continue;
        for (const char *c = o ? " or " : ""; *c && o + 1 < cap; c++)
            buf[o++] = *c;
        for (const char *c = out_rows[i].value; *c && o + 1 < cap; c++)
            buf[o++] = (char)tolower((unsigned char)*c);
    }
    buf[o] = '\0';
}
