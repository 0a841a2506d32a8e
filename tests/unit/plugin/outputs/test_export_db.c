/* Unit tests of the DB exporter (docs/design/outputs.md#db-schema): schema of every table against the spec,
 * string-id numbering, multi-row insert values, opName composition, marker pairing, lazy
 * creation, the session-end rows, file mode, rollback on a size-limited file and durability of committed batches
 * across SIGKILL. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "export_util.h"
#include "pl_test.h"
#include "plugin/outputs/outfile.h"
#include "plugin/pipeline/output.h"
#include "plugin/pipeline/filter.h"

static struct output *session(const char *dir, int32_t rank)
{
    struct output_config cfg = {.log_dir = dir, .rank = rank, .session_start_ns = T0,
                              .report_interval_s = 1};
    struct output *p = NULL;
    assert_int_equal(pt_create(&proc_db_ops, &cfg, &p), 0);
    assert_int_equal(proc_db_ops.start(p), 0);
    return p;
}

static sqlite3 *open_only_db(const char *dir)
{
    char *files[8];
    size_t n = list_files(dir, ".db", files, 8);
    assert_int_equal(n, 1);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(files[0], &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    free_list(files, n);
    return db;
}

/* All rows of a query as "a|b|c" lines joined by '\n' (caller frees). */
static char *q(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("prepare %s: %s", sql, sqlite3_errmsg(db));
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(1, cap);
    while (sqlite3_step(st) == SQLITE_ROW) {
        for (int c = 0; c < sqlite3_column_count(st); c++) {
            const unsigned char *t = sqlite3_column_text(st, c);
            len += (size_t)snprintf(out + len, cap - len, "%s%s", c ? "|" : "", t ? (const char *)t : "NULL");
        }
        len += (size_t)snprintf(out + len, cap - len, "\n");
    }
    sqlite3_finalize(st);
    return out;
}

static void assert_q(sqlite3 *db, const char *sql, const char *expect)
{
    char *got = q(db, sql);
    if (strcmp(got, expect) != 0)
        fail_msg("%s\n--- got ---\n%s--- expected ---\n%s", sql, got, expect);
    free(got);
}

static void feed(struct output *p, const struct mon_record *r, size_t n)
{
    pt_consume(p, r, n);
}

/* One record of every kind plus complete host and device marker ranges. */
static void feed_all_kinds(struct output *p)
{
    struct mon_record r[] = {
        r_api(MON_KIND_API, T0 + 10, T0 + 20, 7, 8, 1, "apiA"),
        r_kernel(T0 + 30, T0 + 40, 0, 2, 3, "AI_CORE", "MatMul"),
        r_comm(T0 + 50, T0 + 60, 1, 4, 4, 1024, "RING", "hcom_allReduce_", "group1", 9),
        r_marker(16, 0, T0 + 70, 5, 7, 8, "step 1", "default"),
        r_marker(16, 1, T0 + 71, 5, 0, 3, "", ""),
        r_marker(32, 0, T0 + 80, 5, 7, 9, "", ""),
        r_marker(32, 1, T0 + 81, 5, 0, 3, "", ""),
        r_hccl(T0 + 90, T0 + 95, 1, 4, 12.5, "hcclOp", "group1"),
        r_memory(0, 1, 11, T0 + 100, T0 + 101, 0xdead, 4096, 7, 0, 2),
        r_memset(5, 1, 64, T0 + 110, T0 + 111, 0, 2, 12),
        r_memcpy(2, 0, 128, T0 + 120, T0 + 121, 0, 2, 13),
    };
    feed(p, r, sizeof(r) / sizeof(r[0]));
}

struct col { const char *name, *type; int pk; };
struct tbl { const char *name; struct col cols[16]; };

/* Written from docs/design/outputs.md#tables, #extra-tables, independently of proc_db.c. */
static const struct tbl spec_tables[] = {
    {"CANN_API", {{"startNs", "INTEGER", 0}, {"endNs", "INTEGER", 0}, {"type", "INTEGER", 0},
                  {"globalTid", "INTEGER", 0}, {"connectionId", "INTEGER", 0}, {"name", "INTEGER", 0}}},
    {"TASK", {{"startNs", "INTEGER", 0}, {"endNs", "INTEGER", 0}, {"deviceId", "INTEGER", 0},
              {"connectionId", "INTEGER", 0}, {"globalTaskId", "INTEGER", 0}, {"globalPid", "INTEGER", 0},
              {"taskType", "INTEGER", 0}, {"contextId", "INTEGER", 0}, {"streamId", "INTEGER", 0},
              {"taskId", "INTEGER", 0}, {"modelId", "INTEGER", 0}}},
    {"COMPUTE_TASK_INFO", {{"name", "INTEGER", 0}, {"globalTaskId", "INTEGER", 0}, {"blockNum", "INTEGER", 0},
                           {"mixBlockNum", "INTEGER", 0}, {"taskType", "INTEGER", 0}, {"opType", "INTEGER", 0},
                           {"inputFormats", "INTEGER", 0}, {"inputDataTypes", "INTEGER", 0},
                           {"inputShapes", "INTEGER", 0}, {"outputFormats", "INTEGER", 0},
                           {"outputDataTypes", "INTEGER", 0}, {"outputShapes", "INTEGER", 0},
                           {"attrInfo", "INTEGER", 0}, {"opState", "INTEGER", 0}, {"hf32Eligible", "INTEGER", 0}}},
    {"COMMUNICATION_OP", {{"opName", "INTEGER", 0}, {"startNs", "INTEGER", 0}, {"endNs", "INTEGER", 0},
                          {"connectionId", "INTEGER", 0}, {"groupName", "INTEGER", 0}, {"opId", "INTEGER", 0},
                          {"relay", "INTEGER", 0}, {"retry", "INTEGER", 0}, {"dataType", "INTEGER", 0},
                          {"algType", "INTEGER", 0}, {"count", "NUMERIC", 0}, {"opType", "INTEGER", 0},
                          {"deviceId", "INTEGER", 0}}},
    {"MSTX_EVENTS", {{"startNs", "INTEGER", 0}, {"endNs", "INTEGER", 0}, {"eventType", "INTEGER", 0},
                     {"rangeId", "INTEGER", 0}, {"category", "INTEGER", 0}, {"message", "INTEGER", 0},
                     {"globalTid", "INTEGER", 0}, {"endGlobalTid", "INTEGER", 0}, {"domainId", "INTEGER", 0},
                     {"connectionId", "INTEGER", 0}}},
    {"STRING_IDS", {{"id", "INTEGER", 0}, {"value", "TEXT", 0}}},
    {"ENUM_HCCL_DATA_TYPE", {{"id", "INTEGER", 1}, {"name", "TEXT", 0}}},
    {"ENUM_MSTX_EVENT_TYPE", {{"id", "INTEGER", 1}, {"name", "TEXT", 0}}},
    {"ENUM_API_TYPE", {{"id", "INTEGER", 1}, {"name", "TEXT", 0}}},
    {"META_DATA", {{"name", "TEXT", 0}, {"value", "TEXT", 0}}},
    {"HOST_INFO", {{"hostUid", "TEXT", 0}, {"hostName", "TEXT", 0}}},
    {"SESSION_TIME_INFO", {{"startTimeNs", "INTEGER", 0}, {"endTimeNs", "INTEGER", 0}}},
    {"RANK_DEVICE_MAP", {{"rankId", "INTEGER", 0}, {"deviceId", "INTEGER", 0}}},
    {"NPU_INFO", {{"id", "INTEGER", 0}, {"name", "TEXT", 0}}},
    {"MSMONITOR_HCCL", {{"startNs", "INTEGER", 0}, {"endNs", "INTEGER", 0}, {"deviceId", "INTEGER", 0},
                        {"streamId", "INTEGER", 0}, {"bandWidth", "REAL", 0}, {"name", "INTEGER", 0},
                        {"commName", "INTEGER", 0}, {"globalPid", "INTEGER", 0}}},
    {"MSMONITOR_MEMORY", {{"startNs", "INTEGER", 0}, {"endNs", "INTEGER", 0}, {"deviceId", "INTEGER", 0},
                          {"streamId", "INTEGER", 0}, {"connectionId", "INTEGER", 0},
                          {"operationType", "INTEGER", 0}, {"memoryKind", "INTEGER", 0},
                          {"address", "INTEGER", 0}, {"bytes", "INTEGER", 0}, {"processId", "INTEGER", 0}}},
    {"MSMONITOR_MEMSET", {{"startNs", "INTEGER", 0}, {"endNs", "INTEGER", 0}, {"deviceId", "INTEGER", 0},
                          {"streamId", "INTEGER", 0}, {"connectionId", "INTEGER", 0}, {"value", "INTEGER", 0},
                          {"bytes", "INTEGER", 0}, {"isAsync", "INTEGER", 0}}},
    {"MSMONITOR_MEMCPY", {{"startNs", "INTEGER", 0}, {"endNs", "INTEGER", 0}, {"deviceId", "INTEGER", 0},
                          {"streamId", "INTEGER", 0}, {"connectionId", "INTEGER", 0}, {"copyKind", "INTEGER", 0},
                          {"bytes", "INTEGER", 0}, {"isAsync", "INTEGER", 0}}},
    {"ENUM_MSMONITOR_MEMCPY_KIND", {{"id", "INTEGER", 1}, {"name", "TEXT", 0}}},
    {"ENUM_MSMONITOR_MEMORY_OPERATION", {{"id", "INTEGER", 1}, {"name", "TEXT", 0}}},
    {"ENUM_MSMONITOR_MEMORY_KIND", {{"id", "INTEGER", 1}, {"name", "TEXT", 0}}},
};

static void test_schema_every_table(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct output *p = session(dir, 3);
    feed_all_kinds(p);
    assert_int_equal(proc_db_ops.tick(p), 0);
    assert_int_equal(proc_db_ops.stop(p, "{\"g\":1}"), 0);
    pt_destroy(p);

    sqlite3 *db = open_only_db(dir);
    size_t ntables = sizeof(spec_tables) / sizeof(spec_tables[0]);
    char *all = q(db, "SELECT count(*) FROM sqlite_master WHERE type='table'");
    char expect_n[16];
    snprintf(expect_n, sizeof(expect_n), "%zu\n", ntables);
    assert_string_equal(all, expect_n);
    free(all);
    for (size_t t = 0; t < ntables; t++) {
        char sql[128], expect[2048] = "";
        size_t len = 0;
        snprintf(sql, sizeof(sql), "SELECT name, type, pk FROM pragma_table_info('%s')", spec_tables[t].name);
        for (const struct col *c = spec_tables[t].cols; c->name; c++)
            len += (size_t)snprintf(expect + len, sizeof(expect) - len, "%s|%s|%d\n", c->name, c->type, c->pk);
        assert_q(db, sql, expect);
    }
    assert_q(db, "SELECT * FROM ENUM_HCCL_DATA_TYPE ORDER BY id",
             "0|INT8\n1|INT16\n2|INT32\n3|FP16\n4|FP32\n5|INT64\n6|UINT64\n7|UINT8\n8|UINT16\n9|UINT32\n10|FP64\n"
             "11|BFP16\n12|INT128\n14|HIF8\n15|FP8E4M3\n16|FP8E5M2\n17|FP8E8M0\n65535|INVALID_TYPE\n");
    assert_q(db, "SELECT * FROM ENUM_MSTX_EVENT_TYPE", "0|marker\n1|push/pop\n2|start/end\n3|marker_ex\n");
    assert_q(db, "SELECT * FROM ENUM_API_TYPE",
             "5000|runtime\n5500|communication\n10000|node\n15000|model\n20000|acl\n50001|op\n50002|queue\n"
             "50003|trace\n50004|mstx\n");
    assert_q(db, "SELECT * FROM ENUM_MSMONITOR_MEMCPY_KIND", "0|UNKNOWN\n1|HTOH\n2|HTOD\n3|DTOH\n4|DTOD\n5|DEFAULT\n");
    assert_q(db, "SELECT * FROM ENUM_MSMONITOR_MEMORY_OPERATION", "0|ALLOCATION\n1|RELEASE\n");
    assert_q(db, "SELECT * FROM ENUM_MSMONITOR_MEMORY_KIND", "0|UNKNOWN\n1|DEVICE\n");
    assert_q(db, "SELECT * FROM META_DATA WHERE name != 'session_stats'",
             "SCHEMA_VERSION_MICRO|1\nSCHEMA_VERSION_MINOR|2\nSCHEMA_VERSION_MAJOR|0\nSCHEMA_VERSION|1.2.0\n"
             "parallel_group_info|{\"g\":1}\nfilter|\n");
    assert_q(db, "SELECT * FROM RANK_DEVICE_MAP", "3|0\n3|1\n");
    assert_q(db, "SELECT * FROM NPU_INFO", "0|UNKNOWN\n1|UNKNOWN\n");
    assert_q(db, "SELECT startTimeNs = 1000000000000, endTimeNs > startTimeNs FROM SESSION_TIME_INFO", "1|1\n");
    assert_q(db, "SELECT count(*), length(hostName) > 0 FROM HOST_INFO", "1|1\n");
    char row[256];
    snprintf(row, sizeof(row), "%llu|%llu|1|4|%d|12.5|12|4|%d\n", T0 + 90, T0 + 95, 0, (int)getpid());
    /* string ids: 12 = hcclOp, 4 = group1 (see test_string_ids) */
    snprintf(row, sizeof(row), "%llu|%llu|1|4|12.5|12|4|%d\n", T0 + 90, T0 + 95, (int)getpid());
    assert_q(db, "SELECT * FROM MSMONITOR_HCCL", row);
    snprintf(row, sizeof(row), "%llu|%llu|0|2|11|0|1|57005|4096|7\n", T0 + 100, T0 + 101);
    assert_q(db, "SELECT * FROM MSMONITOR_MEMORY", row);
    snprintf(row, sizeof(row), "%llu|%llu|0|2|12|5|64|1\n", T0 + 110, T0 + 111);
    assert_q(db, "SELECT * FROM MSMONITOR_MEMSET", row);
    snprintf(row, sizeof(row), "%llu|%llu|0|2|13|2|128|0\n", T0 + 120, T0 + 121);
    assert_q(db, "SELECT * FROM MSMONITOR_MEMCPY", row);
    sqlite3_close(db);
    rm_rf(dir);
    free(dir);
}

static void test_string_ids_and_rows(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct output *p = session(dir, -1);
    feed_all_kinds(p);
    assert_int_equal(proc_db_ops.stop(p, NULL), 0);
    pt_destroy(p);

    sqlite3 *db = open_only_db(dir);
    /* HashId("group1") = 9432122935399943722 → "722" */
    assert_q(db, "SELECT id, value FROM STRING_IDS ORDER BY id",
             "0|apiA\n1|MatMul\n2|AI_CORE\n3|N/A\n4|group1\n5|hcom_allReduce__722_0_1\n6|RING\n"
             "7|hcom_allReduce_\n8|step 1\n9|default\n10|MsTx\n11|\n12|hcclOp\n");
    char exp[1024];
    snprintf(exp, sizeof(exp), "%llu|%llu|10000|%lld|1|0\n", T0 + 10, T0 + 20, (7LL << 32) | 8);
    assert_q(db, "SELECT * FROM CANN_API", exp);
    int pid = (int)getpid();
    snprintf(exp, sizeof(exp),
             "%llu|%llu|0|3|0|%d|2|4294967295|2|4294967295|4294967295\n"
             "%llu|%llu|0|4000000005|1|%d|10|4294967295|3|4294967295|4294967295\n",
             T0 + 30, T0 + 40, pid, T0 + 71, T0 + 81, pid);
    assert_q(db, "SELECT * FROM TASK ORDER BY globalTaskId", exp);
    assert_q(db, "SELECT * FROM COMPUTE_TASK_INFO", "1|0|4294967295|4294967295|2|3|3|3|3|3|3|3|3|3|3\n");
    snprintf(exp, sizeof(exp), "5|%llu|%llu|9|4|0|0|0|4|6|1024|7|1\n", T0 + 50, T0 + 60);
    assert_q(db, "SELECT * FROM COMMUNICATION_OP", exp);
    snprintf(exp, sizeof(exp), "%llu|%llu|2|4294967295|4294967295|8|%lld|%lld|9|4000000005\n", T0 + 70, T0 + 80,
             (7LL << 32) | 8, (7LL << 32) | 9);
    assert_q(db, "SELECT * FROM MSTX_EVENTS", exp);
    assert_q(db, "SELECT * FROM RANK_DEVICE_MAP", "-1|0\n-1|1\n");
    assert_q(db, "SELECT count(*) FROM META_DATA", "6\n"); /* the schema version, the session end */
    sqlite3_close(db);
    rm_rf(dir);
    free(dir);
}

/* Rows go through multi-row INSERTs whose parameters are only rebound when they change:
 * every value of every row must still land, across statement reuse over ticks and with
 * tails shorter than one statement (150 = 2 x 64 + 22, then 70 = 64 + 6). */
static void test_multirow_values(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct output *p = session(dir, 0);
    const char *names[2] = {"h0", "h1"};
    int counts[2] = {150, 70}, i = 0;
    for (int tick = 0; tick < 2; tick++) {
        struct mon_record r[150];
        for (int k = 0; k < counts[tick]; k++, i++) {
            uint64_t t = T0 + (uint64_t)i * 10;
            if (i % 2)
                r[k] = r_hccl(t, t + 5, (uint32_t)(i % 3), (uint32_t)(i / 7 % 2), i * 0.25, names[i / 5 % 2], "g");
            else
                r[k] = r_kernel(t, t + 5, (uint32_t)(i % 3), (uint32_t)(i / 7 % 2), (uint64_t)i, "AI_CORE",
                                names[i / 5 % 2]);
        }
        pt_consume(p, r, (size_t)counts[tick]);
        assert_int_equal(proc_db_ops.tick(p), 0);
    }
    assert_int_equal(proc_db_ops.stop(p, NULL), 0);
    pt_destroy(p);

    sqlite3 *db = open_only_db(dir);
    char sql[1024];
    snprintf(sql, sizeof(sql),
             "SELECT count(*), count(DISTINCT startNs) FROM (SELECT *, (startNs - %llu) / 10 AS i FROM MSMONITOR_HCCL) "
             "WHERE i %% 2 = 1 AND endNs = startNs + 5 AND deviceId = i %% 3 AND streamId = i / 7 %% 2 "
             "AND typeof(bandWidth) = 'real' AND bandWidth = i * 0.25 AND globalPid = %d "
             "AND name = (SELECT id FROM STRING_IDS WHERE value = 'h' || (i / 5 %% 2)) "
             "AND commName = (SELECT id FROM STRING_IDS WHERE value = 'g')",
             T0, (int)getpid());
    assert_q(db, sql, "110|110\n");
    snprintf(sql, sizeof(sql),
             "SELECT count(*), count(DISTINCT t.startNs) FROM (SELECT *, (startNs - %llu) / 10 AS i FROM TASK) t "
             "JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId "
             "WHERE i %% 2 = 0 AND t.endNs = t.startNs + 5 AND t.deviceId = i %% 3 AND t.streamId = i / 7 %% 2 "
             "AND t.connectionId = i AND t.globalTaskId = i / 2 AND t.contextId = 4294967295 "
             "AND c.name = (SELECT id FROM STRING_IDS WHERE value = 'h' || (i / 5 %% 2)) "
             "AND c.opType = (SELECT id FROM STRING_IDS WHERE value = 'N/A') AND c.blockNum = 4294967295",
             T0);
    assert_q(db, sql, "110|110\n");
    sqlite3_close(db);
    rm_rf(dir);
    free(dir);
}

static void test_opname_composition(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct output *p = session(dir, 0);
    struct mon_record r[] = {
        r_comm(T0 + 1, T0 + 2, 0, 0, 3, 1, "RING", "allReduce", "hccl_world_group", 1),
        r_comm(T0 + 3, T0 + 4, 0, 0, 3, 1, "RING", "allReduce", "hccl_world_group", 2),
        r_comm(T0 + 5, T0 + 6, 0, 0, 3, 1, "HD", "broadcast", "", 3),
        r_comm(T0 + 7, T0 + 8, 0, 0, 3, 1, "RING", "allGather", "hccl_world_group", 4),
    };
    feed(p, r, 2);
    assert_int_equal(proc_db_ops.tick(p), 0);
    feed(p, r + 2, 2);
    assert_int_equal(proc_db_ops.stop(p, ""), 0);
    pt_destroy(p);
    sqlite3 *db = open_only_db(dir);
    /* HashId("hccl_world_group") = 7415574198778220483 → "483"; HashId("") = 0 → "0". */
    assert_q(db,
             "SELECT s.value, c.opId FROM COMMUNICATION_OP c JOIN STRING_IDS s ON s.id = c.opName ORDER BY c.opId",
             "allReduce_483_0_1|0\nallReduce_483_1_1|1\nbroadcast_0_0_1|2\nallGather_483_2_1|3\n");
    assert_q(db, "SELECT count(*) FROM META_DATA WHERE name='parallel_group_info'", "0\n");
    sqlite3_close(db);
    rm_rf(dir);
    free(dir);
}

static void test_marker_pairing_and_session_filter(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct output *p = session(dir, 0);
    struct mon_record r[] = {
        r_kernel(T0 - 20, T0 - 1, 0, 0, 1, "T", "Old"),         /* ended before the session: ignored */
        r_marker(2, 0, T0 - 5, 1, 1, 1, "early", "d"),           /* START before session: ignored */
        r_marker(4, 0, T0 + 5, 1, 1, 1, "", ""),                 /* its END: no START → no row */
        r_marker(1, 0, T0 + 10, 2, 1, 2, "inst", "d"),           /* host instant */
        r_marker(8, 0, T0 + 11, 3, 1, 2, "instdev", "d"),        /* host instant with device */
        r_marker(8, 1, T0 + 12, 3, 6, 7, "", ""),                /* device instant → TASK */
        r_marker(2, 0, T0 + 20, 4, 1, 2, "range", "d2"),
        r_marker(16, 1, T0 + 21, 9, 6, 7, "", ""),               /* device START, id 9 */
        r_marker(4, 0, T0 + 30, 4, 1, 3, "", ""),
        r_marker(32, 1, T0 + 31, 9, 6, 8, "", ""),               /* device END: stream from END */
        r_marker(32, 1, T0 + 40, 77, 5, 5, "", ""),              /* END without START: nothing */
    };
    feed(p, r, sizeof(r) / sizeof(r[0]));
    /* through the pipeline's stop: the device-only id 9 waited for a host START until then */
    assert_int_equal(pt_stop(p, NULL), 0);
    pt_destroy(p);
    sqlite3 *db = open_only_db(dir);
    char exp[1024];
    long long g12 = (1LL << 32) | 2, g13 = (1LL << 32) | 3;
    snprintf(exp, sizeof(exp),
             "%llu|%llu|0|inst|%lld|%lld|d|4000000002\n"
             "%llu|%llu|0|instdev|%lld|%lld|d|4000000003\n"
             "%llu|%llu|2|range|%lld|%lld|d2|4000000004\n",
             T0 + 10, T0 + 10, g12, g12, T0 + 11, T0 + 11, g12, g12, T0 + 20, T0 + 30, g12, g13);
    assert_q(db,
             "SELECT startNs, endNs, eventType, (SELECT value FROM STRING_IDS WHERE id=message), globalTid, "
             "endGlobalTid, (SELECT value FROM STRING_IDS WHERE id=domainId), connectionId FROM MSTX_EVENTS",
             exp);
    snprintf(exp, sizeof(exp), "%llu|%llu|6|4000000003|0|7|MsTx\n%llu|%llu|6|4000000009|1|8|MsTx\n", T0 + 12,
             T0 + 12, T0 + 21, T0 + 31);
    assert_q(db,
             "SELECT startNs, endNs, deviceId, connectionId, globalTaskId, streamId, "
             "(SELECT value FROM STRING_IDS WHERE id=taskType) FROM TASK ORDER BY globalTaskId",
             exp);
    /* the ignored records requested no ids; the END with empty strings did */
    assert_q(db, "SELECT value FROM STRING_IDS ORDER BY id", "\ninst\nd\ninstdev\nMsTx\nrange\nd2\n");
    assert_q(db, "SELECT * FROM RANK_DEVICE_MAP", "0|6\n");
    sqlite3_close(db);
    rm_rf(dir);
    free(dir);
}

/* The session end (docs/outputs.md#session-end): the filter text at stop and the session's
 * counters as META_DATA rows, through a pipeline with a filter as the monitor builds it. */
static void test_session_end_rows(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    struct filter_state *fs = NULL;
    struct pipeline *pl = NULL;
    struct output_config cfg = {.log_dir = dir, .rank = 1, .session_start_ns = T0, .report_interval_s = 1};
    assert_int_equal(filter_state_create(&fs), 0);
    assert_int_equal(filter_state_set(fs, "Kernel:Other"), 0);
    assert_int_equal(filter_state_set(fs, "Kernel:MatMul"), 0); /* the one at stop is recorded */
    assert_int_equal(pipeline_create(&cfg, fs, &proc_db_ops, &pl), 0);
    assert_int_equal(pipeline_start(pl), 0);
    struct mon_record r[] = {
        r_kernel(T0 + 30, T0 + 40, 0, 2, 3, "AI_CORE", "MatMul"),
        r_kernel(T0 + 50, T0 + 60, 0, 2, 4, "AI_CORE", "Other"),
        r_kernel(T0 + 70, T0 + 80, 0, 2, 5, "AI_CORE", "MatMul"),
        r_kernel(T0 - 20, T0 - 10, 0, 2, 6, "AI_CORE", "MatMul"),
    };
    pipeline_deliver(pl, r, sizeof(r) / sizeof(r[0]));
    assert_int_equal(pipeline_stop(pl, NULL), 0);
    pipeline_destroy(pl);
    filter_state_destroy(fs);

    sqlite3 *db = open_only_db(dir);
    assert_q(db, "SELECT value FROM META_DATA WHERE name = 'filter'", "Kernel:MatMul\n");
    assert_q(db,
             "SELECT json_extract(value, '$.consumed'), json_extract(value, '$.kept'), "
             "json_extract(value, '$.filtered'), json_extract(value, '$.before_start'), "
             "json_extract(value, '$.dropped_queue'), json_type(value, '$.cpu_ns') "
             "FROM META_DATA WHERE name = 'session_stats'",
             "4|2|1|1|0|integer\n");
    assert_q(db, "SELECT count(*) FROM TASK", "2\n");
    sqlite3_close(db);
    rm_rf(dir);
    free(dir);
}

static void test_lazy_creation_and_mode(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    mode_t old = umask(0077);
    struct output *p = session(dir, 5);
    struct mon_record old_k = r_kernel(1, 2, 0, 0, 1, "T", "Old");
    feed(p, &old_k, 1);
    assert_int_equal(proc_db_ops.tick(p), 0);
    char *files[4];
    assert_int_equal(list_files(dir, ".db", files, 4), 0);
    struct mon_record mem = r_memcpy(1, 0, 8, T0 + 1, T0 + 2, 0, 0, 1); /* extra table only, no strings */
    feed(p, &mem, 1);
    assert_int_equal(proc_db_ops.tick(p), 0);
    size_t n = list_files(dir, ".db", files, 4);
    assert_int_equal(n, 1);
    struct stat st;
    assert_int_equal(stat(files[0], &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    char want[64];
    snprintf(want, sizeof(want), "/msmonitor_%d_", (int)getpid());
    assert_non_null(strstr(files[0], want));
    assert_string_equal(files[0] + strlen(files[0]) - 5, "_5.db");
    assert_int_equal(strlen(strrchr(files[0], '/')) - strlen(want) - strlen("_5.db"), 17);
    assert_int_equal(proc_db_ops.stop(p, NULL), 0);
    pt_destroy(p);
    umask(old);
    sqlite3 *db = open_only_db(dir);
    assert_q(db, "SELECT count(*) FROM STRING_IDS", "0\n");
    assert_q(db, "SELECT * FROM RANK_DEVICE_MAP", "5|-1\n");
    assert_q(db, "SELECT * FROM NPU_INFO", "-1|UNKNOWN\n");
    sqlite3_close(db);
    free_list(files, n);
    rm_rf(dir);
    free(dir);

    /* No record at all: no file. */
    dir = tmpdir_make();
    p = session(dir, 0);
    assert_int_equal(proc_db_ops.stop(p, NULL), 0);
    pt_destroy(p);
    assert_int_equal(list_files(dir, ".db", files, 4), 0);
    rm_rf(dir);
    free(dir);
}

/* The log directory is deleted (and recreated) mid-session: SQLite would keep writing into
 * the unlinked file without an error. The exporter logs it, continues in a new file, and that
 * file gets the later rows and the session tables. */
static void test_file_removed_mid_session(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    char lp[64];
    int fd = log_capture_begin(lp, sizeof(lp));
    struct output *p = session(dir, 3);
    struct mon_record k1 = r_kernel(T0 + 1, T0 + 2, 0, 0, 1, "AI_CORE", "First");
    feed(p, &k1, 1);
    assert_int_equal(proc_db_ops.tick(p), 0);
    char *files[4];
    size_t n = list_files(dir, ".db", files, 4);
    assert_int_equal(n, 1);
    char *old = strdup(files[0]);
    free_list(files, n);
    rm_rf(dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    struct mon_record k2 = r_kernel(T0 + 3, T0 + 4, 1, 0, 2, "AI_CORE", "Second");
    feed(p, &k2, 1);
    assert_int_equal(proc_db_ops.tick(p), 0);
    assert_int_equal(proc_db_ops.stop(p, NULL), 0);
    pt_destroy(p);
    char *log = log_capture_end(fd, lp);
    char want[256];
    snprintf(want, sizeof(want), "db: %s was removed or replaced", old);
    assert_non_null(strstr(log, want));
    free(log);
    sqlite3 *db = open_only_db(dir);
    assert_q(db, "SELECT connectionId, deviceId FROM TASK", "2|1\n");
    assert_q(db, "SELECT value FROM STRING_IDS ORDER BY id", "First\nAI_CORE\nN/A\nSecond\n");
    assert_q(db, "SELECT * FROM RANK_DEVICE_MAP", "3|0\n3|1\n");
    sqlite3_close(db);
    free(old);
    rm_rf(dir);
    free(dir);
}

#define BATCH 200

static void feed_batch(struct output *p, int b)
{
    struct mon_record r[BATCH];
    for (int i = 0; i < BATCH; i++)
        r[i] = r_kernel(T0 + 1000 * (uint64_t)b + (uint64_t)i, T0 + 1000 * (uint64_t)b + (uint64_t)i + 1, 0, 0,
                        (uint64_t)(b * BATCH + i), "AI_CORE", "a fairly long kernel name to fill pages quickly");
    feed(p, r, BATCH);
}

/* Disk full: the child writes batches into a file limited by RLIMIT_FSIZE (SIGXFSZ ignored →
 * EFBIG). Failed batches are rolled back and logged; the process keeps running; everything
 * committed before stays readable and no partial batch appears. */
static void test_rollback_on_full_file(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    char logpath[64];
    int logfd = log_capture_begin(logpath, sizeof(logpath));
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {96 * 1024, 96 * 1024};
        setrlimit(RLIMIT_FSIZE, &rl);
        struct output *p = session(dir, 0);
        for (int b = 0; b < 60; b++) {
            feed_batch(p, b);
            proc_db_ops.tick(p);
        }
        proc_db_ops.stop(p, NULL);
        pt_destroy(p);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char *log = log_capture_end(logfd, logpath);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* one clear line naming the tables of the transaction, the file and SQLite's error */
    assert_non_null(strstr(log, " TASK"));
    char want[128];
    snprintf(want, sizeof(want), " in %s/msmonitor_", dir);
    if (!strstr(log, want))
        fail_msg("no '%s' in:\n%s", want, log);
    assert_non_null(strstr(log, ".db failed: "));
    assert_non_null(strstr(log, "batch discarded"));
    sqlite3 *db = open_only_db(dir);
    char *cnt = q(db, "SELECT count(*), count(*) % 200, min(connectionId), max(connectionId) = count(*) - 1 FROM TASK");
    long n = strtol(cnt, NULL, 10);
    assert_true(n >= BATCH);      /* the first batches were committed */
    assert_true(n < 60 * BATCH);  /* and later ones rolled back */
    char expect[64];
    snprintf(expect, sizeof(expect), "%ld|0|0|1\n", n);
    assert_string_equal(cnt, expect);
    free(cnt);
    sqlite3_close(db);
    free(log);
    rm_rf(dir);
    free(dir);
}

/* kill -9 after N committed batches: the DB opens and holds at least those N batches. */
static void test_sigkill_keeps_committed_batches(void **state)
{
    (void)state;
    char *dir = tmpdir_make();
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        struct output *p = session(dir, 0);
        for (int b = 0;; b++) {
            feed_batch(p, b);
            proc_db_ops.tick(p);
            char c = 'x';
            if (write(pfd[1], &c, 1) != 1)
                _exit(1);
        }
    }
    close(pfd[1]);
    char c;
    int got = 0;
    while (got < 10 && read(pfd[0], &c, 1) == 1)
        got++;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(pfd[0]);
    assert_int_equal(got, 10);
    sqlite3 *db = open_only_db(dir);
    assert_q(db, "PRAGMA integrity_check", "ok\n");
    char *cnt = q(db, "SELECT count(*) FROM TASK");
    assert_true(strtol(cnt, NULL, 10) >= 10 * BATCH);
    free(cnt);
    sqlite3_close(db);
    rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_every_table),
        cmocka_unit_test(test_string_ids_and_rows),
        cmocka_unit_test(test_multirow_values),
        cmocka_unit_test(test_opname_composition),
        cmocka_unit_test(test_marker_pairing_and_session_filter),
        cmocka_unit_test(test_session_end_rows),
        cmocka_unit_test(test_lazy_creation_and_mode),
        cmocka_unit_test(test_file_removed_mid_session),
        cmocka_unit_test(test_rollback_on_full_file),
        cmocka_unit_test(test_sigkill_keeps_committed_batches),
    };
    log_set_level(LOG_LVL_WARNING);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
