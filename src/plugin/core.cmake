# core.cmake — the monitor core of libmsmonitor (owned by the plugin-core area): logging and
# env set-up, IPC client, DynoMonitor, config validation, MsptiMonitor session, buffers,
# msPTI backend loader, native poller and the exported C API.
list(APPEND MSMON_PLUGIN_SRCS
  ${CMAKE_CURRENT_LIST_DIR}/penv.c
  ${CMAKE_CURRENT_LIST_DIR}/plog.c
  ${CMAKE_CURRENT_LIST_DIR}/ipc_client.c
  ${CMAKE_CURRENT_LIST_DIR}/dyno.c
  ${CMAKE_CURRENT_LIST_DIR}/mconfig.c
  ${CMAKE_CURRENT_LIST_DIR}/bufpool.c
  ${CMAKE_CURRENT_LIST_DIR}/backend_mspti.c
  ${CMAKE_CURRENT_LIST_DIR}/monitor.c
  ${CMAKE_CURRENT_LIST_DIR}/npoll.c
  ${CMAKE_CURRENT_LIST_DIR}/dynamic.c
  ${CMAKE_CURRENT_LIST_DIR}/api.c)
list(APPEND MSMON_PLUGIN_LIBS m)
