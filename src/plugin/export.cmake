# export: the file exporters of the plugin (DB and JSONL, 05-outputs.md §3–4) and their
# shared helpers. Included by src/plugin/CMakeLists.txt.
list(APPEND MSMON_PLUGIN_SRCS
     ${CMAKE_CURRENT_LIST_DIR}/outfile.c
     ${CMAKE_CURRENT_LIST_DIR}/linering.c
     ${CMAKE_CURRENT_LIST_DIR}/proc_db.c
     ${CMAKE_CURRENT_LIST_DIR}/proc_jsonl.c)
list(APPEND MSMON_PLUGIN_LIBS PkgConfig::SQLITE)
