# data: records, filter, marker pairing and the metric + standalone processors (issue 4).
list(APPEND MSMON_PLUGIN_SRCS
  ${CMAKE_CURRENT_LIST_DIR}/record.c
  ${CMAKE_CURRENT_LIST_DIR}/idmap.c
  ${CMAKE_CURRENT_LIST_DIR}/filter.c
  ${CMAKE_CURRENT_LIST_DIR}/markpair.c
  ${CMAKE_CURRENT_LIST_DIR}/proc_metric.c
  ${CMAKE_CURRENT_LIST_DIR}/proc_memory.c)
