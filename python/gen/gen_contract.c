/* gen_contract: prints msmonitor/_contract.py, the Python view of the contract tables in
 * src/contract/ (docs/design/contract.md#python), so the package never holds a hand-written
 * copy. Run by CMake at build time; the output goes to stdout. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "contract/cfgkeys.h"
#include "contract/cfgrules.h"
#include "contract/datamsg.h"
#include "contract/dbschema.h"
#include "contract/kinds.h"
#include "contract/names.h"
#include "contract/podid.h"
#include "contract/stats.h"
#include "msmon/ipc_wire.h"
#include "msmon/msmonitor.h"

/* A Python string literal of s; the table texts are printable ASCII, anything else is escaped. */
static void pystr(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c > 0x7e)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void kinds(void)
{
    printf("# Activity kinds (name, msPTI value) in the order users see them.\nKINDS = (\n");
#define KIND(name, id, value, standalone) printf("    (\"%s\", %d),\n", #name, value);
#include "contract/kinds.def"
#undef KIND
    printf(")\nKIND_VALUES = dict(KINDS)\nKIND_NAMES = {v: n for n, v in KINDS}\n\n");
    printf("# The kinds the standalone Monitor accepts, in ActivityKind's order: (name, getter stem).\n"
           "STANDALONE_KINDS = (\n");
    for (size_t i = 0; i < KINDS_STANDALONE_COUNT; i++) {
        int k = kinds_standalone_at(i);
        char stem[32];

        if (kinds_stem(k, stem, sizeof(stem)) == 0)
            printf("    (\"%s\", \"%s\"),\n", kinds_name(k), stem);
    }
    printf(")\n\n");
}

static void data_messages(void)
{
    printf("# Data kinds beyond the activity kinds.\nDATA_KINDS = (");
    static const char *const dk[] = { DATAMSG_OP_STATS, DATAMSG_PLUGIN_STATS, DATAMSG_PLUGIN_INFO,
                                      DATAMSG_PLUGIN_HEALTH, DATAMSG_STEP_SUMMARY };
    for (size_t i = 0; i < sizeof(dk) / sizeof(dk[0]); i++) {
        printf("%s", i ? ", " : "");
        pystr(dk[i]);
    }
    printf(")\nSTEP_SUMMARY = ");
    pystr(DATAMSG_STEP_SUMMARY);
    printf("\nPLUGIN_STATS = ");
    pystr(DATAMSG_PLUGIN_STATS);
    printf("\n# A StepSummary row's duration keys (plus \"step\").\nSTEP_FIELDS = (");
    const char *sep = "";
#define DATAMSG_STEP_FIELD(field, key, what) printf("%s\"%s\"", sep, key), sep = ", ";
    DATAMSG_STEP_FIELDS(DATAMSG_STEP_FIELD)
#undef DATAMSG_STEP_FIELD
    printf(")\n# Session counters: (PluginStats key, stats-line label), in the stats line's order.\n"
           "STATS_COUNTERS = (\n");
    for (int pos = 0; pos < STATS_COUNT; pos++) {
#define STAT(key, label, p, what)                                                                  \
    if (p == pos)                                                                                  \
        printf("    (\"%s\", \"%s\"),\n", #key, label);
        STATS_COUNTERS(STAT)
#undef STAT
    }
    printf(")\n\n");
}

static void names(void)
{
    printf("# Sockets in the socket directory, the dyno-mode segment.\nSOCK_CTL = ");
    pystr(NAMES_SOCK_FILE(NAMES_SOCK_CTL));
    printf("\nSOCK_DATA = ");
    pystr(NAMES_SOCK_FILE(NAMES_SOCK_DATA));
    printf("\nSOCK_RPC = ");
    pystr(NAMES_SOCK_FILE(NAMES_SOCK_RPC));
    printf("\nSHM_PREFIX = ");
    pystr(NAMES_SHM_PREFIX);
    printf("\nSHM_SIZE = %u\n", (unsigned)NAMES_SHM_SIZE);
    printf("SHM_STEPS_PREFIX = ");
    pystr(NAMES_SHM_STEPS_PREFIX);
    printf("\nSHM_PRIVATE_PREFIX = ");
    pystr(NAMES_SHM_PRIVATE_PREFIX);
    printf("\n# Every file dyno mode creates in the segment directory, by name prefix (cleanup-shm).\n"
           "SHM_FILE_PREFIXES = (\n");
#define SHM_FILE(id, prefix, what) printf("    \"%s\",  # %s\n", prefix, what);
    NAMES_SHM_FILES(SHM_FILE)
#undef SHM_FILE
    printf(")\n\n");
    printf("# DB: a marker's connectionId is its msPTI id plus this.\nDB_MARKER_CONN_OFFSET = %llu\n\n",
           (unsigned long long)NAMES_DB_MARKER_CONN_OFFSET);
    printf("# The session end in the DB (META_DATA names) and JSONL (this kind, with the same keys).\n"
           "META_FILTER = ");
    pystr(NAMES_META_FILTER);
    printf("\nMETA_STATS = ");
    pystr(NAMES_META_STATS);
    printf("\n\n");
    printf("# Record value names (Communication data types, MemCpy kinds).\nDTYPE_NAMES = {\n");
#define DTYPE(value, name, bytes) printf("    %d: \"%s\",\n", value, #name);
#include "contract/recnames.def"
#undef DTYPE
    printf("}\n# Bytes per element of each data type.\nDTYPE_SIZES = {\n");
#define DTYPE(value, name, bytes) printf("    \"%s\": %d,\n", #name, bytes);
#include "contract/recnames.def"
#undef DTYPE
    printf("}\nDTYPE_INVALID = ");
    pystr(names_dtype(-1));
    printf("\nMEMCPY_KIND_NAMES = {\n");
#define MEMCPY_KIND(value, name) printf("    %d: \"%s\",\n", value, #name);
#include "contract/recnames.def"
#undef MEMCPY_KIND
    printf("}\n\n");
}

static void trace_cats(void)
{
    printf("# Chrome trace categories of the nputrace output.\n");
#define CAT(id)                                                                                    \
    printf("TRACE_CAT_%s = ", #id);                                                                \
    pystr(NAMES_CAT_##id);                                                                         \
    putchar('\n');
    NAMES_TRACE_CATS(CAT)
#undef CAT
    printf("\n");
}

static void trace_window(void)
{
    printf("# The nputrace window's option bits (include/msmon/msmonitor.h MSMON_TRACE_*).\n");
#define BIT(id) printf("TRACE_%s = 0x%x\n", #id, (unsigned)MSMON_TRACE_##id);
    BIT(CPU) BIT(NPU) BIT(ANALYSE) BIT(ASYNC) BIT(RECORD_SHAPES) BIT(PROFILE_MEMORY) BIT(WITH_STACK)
    BIT(WITH_FLOPS) BIT(WITH_MODULES) BIT(EXPORT_DB)
#undef BIT
    printf("\n");
}

static void db_schema(void)
{
    printf("# DB tables: the incremental ones in writing order, then those written once (DB_<name>).\n"
           "DB_TABLES = (\n");
#define DB_TABLE(id, ncols, real_col, cols) printf("    \"%s\",\n", #id);
#include "contract/dbschema.def"
#undef DB_TABLE
    printf(")\nDB_FIXED_TABLES = (\n");
#define FIXED(id) printf("    \"%s\",\n", DBSCHEMA_##id);
    DBSCHEMA_FIXED_TABLES(FIXED)
#undef FIXED
    printf(")\n");
#define DB_TABLE(id, ncols, real_col, cols) printf("DB_%s = \"%s\"\n", #id, #id);
#include "contract/dbschema.def"
#undef DB_TABLE
#define FIXED(id) printf("DB_%s = \"%s\"\n", #id, DBSCHEMA_##id);
    DBSCHEMA_FIXED_TABLES(FIXED)
#undef FIXED
    printf("DB_META_SCHEMA_PREFIX = ");
    pystr(DBSCHEMA_META_SCHEMA_PREFIX);
    printf("\nMETA_PARALLEL = ");
    pystr(NAMES_META_PARALLEL);
    printf("\nMETA_RANK_DEVICE_MAP = ");
    pystr(NAMES_META_RANK_DEVICE_MAP);
    printf("\n# A device step marker: a TASK row of this taskType, paired with its MSTX_EVENTS range\n"
           "# (eventType DB_MSTX_RANGE) by connectionId.\nDB_MSTX_TASK_TYPE = ");
    pystr(DBSCHEMA_MSTX_TASK_TYPE);
    printf("\nDB_MSTX_RANGE = %d\n", DBSCHEMA_MSTX_RANGE);
    printf("# CANN_API.type of the API kinds: API and NodeAPI, AclAPI, RuntimeAPI.\n"
           "DB_API_TYPE_NODE = %d\nDB_API_TYPE_ACL = %d\nDB_API_TYPE_RUNTIME = %d\n\n",
           DBSCHEMA_API_TYPE_NODE, DBSCHEMA_API_TYPE_ACL, DBSCHEMA_API_TYPE_RUNTIME);
}

static void deploy(void)
{
    printf("# Deployment (docs/deploy.md): default ports, the environment that ties a job to the daemon,\n"
           "# the downward-API variables a process reports its pod by, and the netns link.\n");
    printf("RPC_PORT = %d\nPROMETHEUS_PORT = %d\nENV_SOCKET_DIR = ", NAMES_RPC_PORT, NAMES_PROMETHEUS_PORT);
    pystr(NAMES_ENV_SOCKET_DIR);
    printf("\nENV_USE_DAEMON = ");
    pystr(NAMES_ENV_USE_DAEMON);
    printf("\nENV_KINETO_SOCKET_DIR = ");
    pystr(NAMES_ENV_KINETO_SOCKET_DIR);
    printf("\nNETNS_LINK = ");
    pystr(NAMES_NETNS_LINK);
    printf("\nMETA_POD = ");
    pystr(NAMES_META_POD);
    printf("\n# (environment variable, PluginHealth key, getStatus \"pod\" key, longest value)\nPOD_FIELDS = (\n");
    for (int f = 0; f < PODID_NFIELDS; f++) {
        printf("    (");
        pystr(podid_env((enum podid_field)f));
        printf(", ");
        pystr(podid_key((enum podid_field)f));
        printf(", ");
        pystr(podid_status_key((enum podid_field)f));
        printf(", %zu),\n", podid_cap((enum podid_field)f));
    }
    printf(")\nPOD_ENV = tuple(f[0] for f in POD_FIELDS)\n\n");
}

static void config_rules(void)
{
    static const char *const types[] = { [CFGRULES_BOOL] = "bool",     [CFGRULES_INT] = "int",
                                         [CFGRULES_SECONDS] = "seconds", [CFGRULES_KINDS] = "kinds",
                                         [CFGRULES_DIR] = "dir",       [CFGRULES_EXPORT] = "export",
                                         [CFGRULES_FILTER] = "filter" };
    const struct cfgrules_rule *r;

    printf("# npu-monitor config keys in the CLI's order: (key, type, default, min, max, -1 allowed, command).\n"
           "CONFIG_RULES = (\n");
    for (size_t i = 0; (r = cfgrules_at(i)); i++) {
        printf("    (");
        pystr(r->key);
        printf(", \"%s\", ", types[r->type]);
        pystr(r->dflt);
        printf(", %lld, %lld, %s, ", (long long)r->min, (long long)r->max, r->minus_one ? "True" : "False");
        pystr(r->command);
        printf("),\n");
    }
    printf(")\n\n");
}

/* A regular expression as parts: text matched literally (escaped here) or pattern syntax. */
struct re_part {
    bool lit;
    const char *s;
};

/* The parts as one Python string literal. */
static void pyre(const struct re_part *p, size_t n)
{
    char re[512];
    size_t o = 0;

    for (size_t i = 0; i < n; i++)
        for (const char *c = p[i].s; *c && o + 2 < sizeof(re); c++) {
            if (p[i].lit && strchr(".^$*+?{}[]\\|()-", *c))
                re[o++] = '\\';
            re[o++] = *c;
        }
    re[o] = '\0';
    pystr(re);
}

/* The output files' names (names_export_file, names_trace_file) as the analysis matches and
 * builds them. */
static void files(void)
{
    static const struct re_part export_re[] = {
        { false, "^" }, { true, NAMES_FILE_PREFIX }, { false, "(\\d+)_(\\d+)_(-?\\d+)\\.(" },
        { true, NAMES_EXT_DB }, { false, "|" }, { true, NAMES_EXT_JSONL }, { false, ")$" },
    };
    static const struct re_part trace_re[] = {
        { false, "^" }, { true, NAMES_FILE_PREFIX }, { false, "(" }, { true, NAMES_TRACE_OURS }, { false, "|" },
        { true, NAMES_TRACE_TORCH }, { false, ")_\\d+" }, { true, NAMES_TRACE_RANK }, { false, "\\d+" },
        { true, NAMES_TRACE_STEPS }, { false, "\\d+-\\d+" }, { true, NAMES_TRACE_SUFFIX }, { false, "(" },
        { true, NAMES_GZ_SUFFIX }, { false, ")?$" },
    };
    static const char *const strs[][2] = {
        { "FILE_PREFIX", NAMES_FILE_PREFIX },
        { "# nputrace's traces: ours and torch.profiler's beside them.\nTRACE_FILE_OURS", NAMES_TRACE_OURS },
        { "TRACE_FILE_TORCH", NAMES_TRACE_TORCH },
        { "# str.format fields: who, pid, rank (0 when unknown), start, stop; gz adds GZ_SUFFIX.\nTRACE_FILE_NAME",
          NAMES_FILE_PREFIX "{who}_{pid}" NAMES_TRACE_RANK "{rank}" NAMES_TRACE_STEPS "{start}-{stop}"
          NAMES_TRACE_SUFFIX },
        { "GZ_SUFFIX", NAMES_GZ_SUFFIX },
        { "# In the name of every file of the window [start, stop).\nTRACE_WINDOW_TAG",
          NAMES_TRACE_STEPS "{start}-{stop}." },
    };

    printf("# Files the outputs write (names_export_file / names_trace_file).\n");
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        printf("%s = ", strs[i][0]);
        pystr(strs[i][1]);
        printf("\n");
    }
    printf("EXPORT_EXTS = (");
    pystr(NAMES_EXT_DB);
    printf(", ");
    pystr(NAMES_EXT_JSONL);
    printf(")\n# msmonitor_<pid>_<YYYYmmddHHMMSS><mmm>_<rank>.<ext>: groups pid, stamp, rank, ext.\n"
           "EXPORT_FILE_PATTERN = ");
    pyre(export_re, sizeof(export_re) / sizeof(export_re[0]));
    printf("\nTRACE_FILE_PATTERN = ");
    pyre(trace_re, sizeof(trace_re) / sizeof(trace_re[0]));
    printf("\n\n");
}

/* The IPC status values of the wire and their one spelling (names_ipc_status). */
static void status_values(void)
{
    static const int32_t v[] = { IPC_STATUS_UNINITIALIZED, IPC_STATUS_IDLE, IPC_STATUS_RUNNING, IPC_STATUS_READY };

    printf("# IPC status values (the wire's IPC_STATUS_*) and the words dyno shows for them.\n");
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        printf("STATUS_");
        for (const char *c = names_ipc_status(v[i]); *c; c++)
            putchar(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c);
        printf(" = %d\n", (int)v[i]);
    }
    printf("STATUS_NAMES = {");
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        printf("%s%d: ", i ? ", " : "", (int)v[i]);
        pystr(names_ipc_status(v[i]));
    }
    printf("}\n\n");
}

/* The npu-monitor keys by name, and the one boolean rule of config values (cfgkeys_bool). */
static void config_keys(void)
{
    const struct cfgrules_rule *r;

    printf("# The npu-monitor config keys (KEY_<key>).\n");
    for (size_t i = 0; (r = cfgrules_at(i)); i++) {
        printf("KEY_%s = ", r->key);
        pystr(r->key);
        printf("\n");
    }
    printf("\n\ndef config_true(value):\n"
           "    \"\"\"The boolean rule of config values (cfgkeys_true): true only for the text ");
    pystr("true");
    printf(" in any case.\"\"\"\n"
           "    return isinstance(value, str) and value.isascii() and value.lower() == ");
    pystr("true");
    printf("\n\n\n");
}

static void step_marker(void)
{
    printf("# The step marker: mstx range message \"step <N>\", N decimal digits <= STEP_MAX.\nSTEP_PREFIX = ");
    pystr(NAMES_STEP_PREFIX);
    printf("\nSTEP_MAX = %lld\n# torch.profiler's step range, read by the same digits rule.\nTORCH_STEP_PREFIX = ",
           (long long)NAMES_STEP_MAX);
    pystr(NAMES_TORCH_STEP_PREFIX);
    printf("\n\n\n");
    printf("def step_of(name):\n"
           "    \"\"\"N of a step marker name, else None (the rule of names_step_parse).\"\"\"\n"
           "    if not isinstance(name, str) or not name.startswith(STEP_PREFIX):\n"
           "        return None\n"
           "    digits = name[len(STEP_PREFIX):]\n"
           "    if not digits or any(c < \"0\" or c > \"9\" for c in digits):\n"
           "        return None\n"
           "    n = int(digits)\n"
           "    return n if n <= STEP_MAX else None\n");
}

int main(void)
{
    printf("\"\"\"msmonitor._contract: generated at build time by python/gen/gen_contract.c from the tables in\n"
           "src/contract/ (docs/design/contract.md). Do not edit; change the tables.\"\"\"\n\n");
    kinds();
    data_messages();
    names();
    trace_cats();
    trace_window();
    db_schema();
    config_rules();
    config_keys();
    files();
    status_values();
    deploy();
    step_marker();
    return ferror(stdout) ? 1 : 0;
}
