/* dbschema: the DB export's table names and columns (docs/design/outputs.md#tables), written once
 * for the plugin's writer (db_rows.c, proc_db.c) and the Python analysis (generated _contract.py),
 * so a reader never restates a table or column name. */
#ifndef MSMON_CONTRACT_DBSCHEMA_H
#define MSMON_CONTRACT_DBSCHEMA_H

/* The columns every device activity table of ours starts with. */
#define DBSCHEMA_COLS_DEVICE_SPAN "startNs INTEGER, endNs INTEGER, deviceId INTEGER, streamId INTEGER, "

/* The incremental tables with their columns: dbschema.def, DB_TABLE(id, ncols, real_col, columns).
 * The MSMONITOR_* tables follow the upstream ones; DBSCHEMA_FIRST_EXTRA names the first. */
#define DBSCHEMA_FIRST_EXTRA MSMONITOR_HCCL

/* Tables written once per file (STRING_IDS grows with each commit) or at the session end:
 * DBSCHEMA_<id> is the name, DBSCHEMA_<id>_COLS the columns. */
#define DBSCHEMA_FIXED_TABLES(X)                                                                               \
    X(STRING_IDS) X(META_DATA) X(HOST_INFO) X(SESSION_TIME_INFO) X(RANK_DEVICE_MAP) X(NPU_INFO)
#define DBSCHEMA_STRING_IDS "STRING_IDS"
#define DBSCHEMA_STRING_IDS_COLS "id INTEGER, value TEXT"
#define DBSCHEMA_META_DATA "META_DATA"
#define DBSCHEMA_META_DATA_COLS "name TEXT, value TEXT"
#define DBSCHEMA_HOST_INFO "HOST_INFO"
#define DBSCHEMA_HOST_INFO_COLS "hostUid TEXT, hostName TEXT"
#define DBSCHEMA_SESSION_TIME_INFO "SESSION_TIME_INFO"
#define DBSCHEMA_SESSION_TIME_INFO_COLS "startTimeNs INTEGER, endTimeNs INTEGER"
#define DBSCHEMA_RANK_DEVICE_MAP "RANK_DEVICE_MAP"
#define DBSCHEMA_RANK_DEVICE_MAP_COLS "rankId INTEGER, deviceId INTEGER"
#define DBSCHEMA_NPU_INFO "NPU_INFO"
#define DBSCHEMA_NPU_INFO_COLS "id INTEGER, name TEXT"

/* META_DATA rows of the schema version share this name prefix (the session end's rows: names.h). */
#define DBSCHEMA_META_SCHEMA_PREFIX "SCHEMA_VERSION"
/* A device step marker is a TASK row whose taskType is this string; it pairs with its host range
 * (MSTX_EVENTS row of eventType DBSCHEMA_MSTX_RANGE) by connectionId. */
#define DBSCHEMA_MSTX_TASK_TYPE "MsTx"
#define DBSCHEMA_MSTX_RANGE 2
/* CANN_API.type of the API kinds (ENUM_API_TYPE's node, acl and runtime rows): API and NodeAPI,
 * AclAPI, RuntimeAPI. */
#define DBSCHEMA_API_TYPE_NODE 10000
#define DBSCHEMA_API_TYPE_ACL 20000
#define DBSCHEMA_API_TYPE_RUNTIME 5000

#endif
