/* fuzz_daemon_data: one `data` payload through the daemon's real router, as a monitored rank
 * would send it: the JSON record mapping (data_sink.c), PluginStats / PluginInfo into the
 * status table and registry (status.c), StepSummary into the steps store (steps.c), the
 * Prometheus mapping and store (promfam.c) and the TensorBoard record mapping (tb_logger.c,
 * into a temporary directory removed at exit); then the /metrics render, whose every line
 * must be a comment or `name{labels} value` with a valid name, and the snapshots. The first
 * byte picks the sender pid the kernel would vouch for (0 = unknown, else 4242). */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/ipc/data_sink.h"
#include "daemon/ipc/registry.h"
#include "daemon/ipc/status.h"
#include "daemon/ipc/steps.h"
#include "daemon/sinks/promfam.h"
#include "daemon/sinks/tb_logger.h"

const char *const fuzz_seeds[] = {
    "0{\"deviceId\":0,\"duration\":5,\"kind\":\"Kernel\",\"name\":\"k\\n\\\"x\",\"timestamp\":1749889801120000000}",
    "1{\"activity\":\"Kernel\",\"deviceId\":0,\"duration\":3,\"interval_ns\":1000000000,\"kind\":\"OpStats\","
    "\"ops\":[{\"avg\":1,\"count\":3,\"max\":2,\"min\":1,\"name\":\"a\\u00e9{}\",\"total\":3}],\"timestamp\":1}",
    "1{\"kind\":\"PluginStats\",\"duration\":1,\"timestamp\":1,\"deviceId\":-1,\"pid\":4242,"
    "\"stats\":{\"kept\":9,\"dropped_queue\":7,\"cpu_ns\":18446744073709551615}}",
    "0{\"kind\":\"PluginStats\",\"duration\":1,\"timestamp\":1,\"deviceId\":-1,\"pid\":77,\"stats\":{\"kept\":-1}}",
    "1{\"kind\":\"PluginInfo\",\"duration\":0,\"timestamp\":1,\"deviceId\":-1,\"pid\":4242,"
    "\"backend\":\"mspti\",\"library\":\"/opt/\\u001b[31mlib.so\"}",
    "1{\"kind\":\"StepSummary\",\"duration\":0,\"timestamp\":5,\"deviceId\":0,\"pid\":4242,\"rank\":3,\"job\":9,"
    "\"src\":\"step\",\"dropped\":2,\"steps\":[{\"step\":1,\"start\":10,\"wall\":100,\"compute\":60,\"comm\":20,"
    "\"memcpy\":5,\"host\":15},{\"step\":-9223372036854775808,\"start\":0,\"wall\":0,\"compute\":0,\"comm\":0,"
    "\"memcpy\":0,\"host\":0}]}",
    "1{\"kind\":\"StepSummary\",\"duration\":0,\"timestamp\":5,\"deviceId\":-1,\"pid\":4243,\"rank\":4,"
    "\"src\":\"step\",\"steps\":[{\"step\":2,\"start\":10,\"wall\":100,\"compute\":60,\"comm\":20,\"memcpy\":5,"
    "\"host\":15,\"wait\":6,\"transfer\":14,\"split\":\"measured\"},{\"step\":3,\"start\":110,\"wall\":100,"
    "\"compute\":60,\"comm\":20,\"memcpy\":5,\"host\":15,\"wait\":0,\"transfer\":20,\"split\":\"none\"}]}",
    "0{\"kind\":\"StepSummary\",\"duration\":0,\"timestamp\":5,\"deviceId\":-1,\"pid\":4243,\"rank\":4,"
    "\"steps\":[{\"step\":4,\"start\":10,\"wall\":100,\"compute\":60,\"comm\":20,\"memcpy\":5,\"host\":15,"
    "\"split\":\"inferred\"}]}",
    "0{\"kind\":\"Marker\",\"deviceId\":4294967295,\"duration\":1,\"timestamp\":2,\"name\":\"step 1\",\"domain\":\"d\"}",
    "0{\"deviceId\":\"host\",\"duration\":1,\"timestamp\":3,\"kind\":\"Memcpy\",\"bytes\":1e308,\"name\":\"\"}",
};
const size_t fuzz_nseeds = sizeof(fuzz_seeds) / sizeof(fuzz_seeds[0]);

static char tb_dir[] = "/tmp/fuzz_tbXXXXXX";

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_tb_dir(void)
{
    nftw(tb_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int name_char(char c, int first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* Every line: "# HELP ...", "# TYPE ...", or a metric name then '{' or ' '. */
static void check_exposition(const char *t, size_t n)
{
    size_t i = 0;
    while (i < n) {
        const char *nl = memchr(t + i, '\n', n - i);
        if (!nl)
            abort();           /* the page ends with a newline */
        size_t len = (size_t)(nl - (t + i));
        const char *l = t + i;
        if (len >= 2 && l[0] == '#') {
            if (!(len > 7 && (memcmp(l, "# HELP ", 7) == 0 || memcmp(l, "# TYPE ", 7) == 0)))
                abort();
        } else {
            size_t k = 0;
            while (k < len && name_char(l[k], k == 0))
                k++;
            if (k == 0 || k == len || (l[k] != '{' && l[k] != ' '))
                abort();
        }
        i += len + 1;
    }
}

static struct promfam_store *prom;
static struct status_table *st;
static struct registry *reg;
static struct steps_store *steps;
static struct data_router dr;

/* A fresh router, Prometheus store and TensorBoard directory (every 256 inputs, so the page
 * checked stays small and the directory does not grow). */
static void build(void)
{
    char err[256];
    struct sink tb;
    struct tb_cfg cfg = { .dir = tb_dir, .op_stats = true };
    if (promfam_store_create("fuzzhost", 0, &prom) != 0)
        abort();
    data_router_init(&dr);
    dr.st = st;
    dr.reg = reg;
    dr.steps = steps;
    data_router_add(&dr, promfam_store_sink(prom, "prometheus"));
    if (tb_logger_create(&cfg, &tb, err, sizeof(err)) != 0)
        abort();
    data_router_add(&dr, tb);
}

static void teardown(void)
{
    data_router_fini(&dr);
    promfam_store_destroy(prom);
    rm_tb_dir();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned runs;
    if (runs == 0) {
        log_set_level(LOG_LVL_FATAL);
        if (!mkdtemp(tb_dir) || status_create(&st) != 0 || registry_create("fuzzhost", &reg) != 0 ||
            steps_create(&steps) != 0)
            abort();
        atexit(rm_tb_dir);
        build();
    } else if (runs % 256 == 0) {
        teardown();
        build();
    }
    runs++;
    if (size < 1)
        return 0;
    int32_t sender = data[0] == '1' ? 4242 : 0;
    data_handle_from(&dr, (const char *)data + 1, size - 1, 1749889801120000000ull, sender);

    char *text = NULL;
    size_t len = 0;
    if (promfam_store_render(prom, 1749889801120ull, &text, &len) == 0) {
        check_exposition(text, len);
        free(text);
    }
    struct steps_rank *ranks = NULL;
    size_t n = 0;
    if (steps_snapshot(steps, &ranks, &n) == 0)
        free(ranks);
    struct status_entry *ents = NULL;
    if (status_list(st, &ents, &n) == 0)
        free(ents);
    return 0;
}
