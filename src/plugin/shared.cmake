# shared.cmake — libmsmonitor.so: the whole static core linked into one shared object; a
# version script exports only the functions of include/msmon/msmonitor.h (the common and
# IPC libraries are not built with hidden visibility, so visibility alone is not enough).
# Whole-archive because the core references other areas' objects weakly (see monitor.c).
set(_msmon_map ${CMAKE_CURRENT_BINARY_DIR}/libmsmonitor.map)
file(WRITE ${_msmon_map} "{\n  global:\n    msmon_*;\n    InitializeInjection;\n  local:\n    *;\n};\n")
add_library(msmonitor SHARED ${CMAKE_CURRENT_LIST_DIR}/libmsmonitor.c)
set_target_properties(msmonitor PROPERTIES OUTPUT_NAME msmonitor C_VISIBILITY_PRESET hidden
                      LINK_DEPENDS ${_msmon_map})
target_link_options(msmonitor PRIVATE -Wl,-soname,libmsmonitor.so -Wl,--no-undefined
                    -Wl,--version-script=${_msmon_map})
# (-Wl,--whole-archive rather than $<LINK_LIBRARY:WHOLE_ARCHIVE> keeps CMake 3.16 working.)
target_link_libraries(msmonitor PRIVATE -Wl,--whole-archive msmon_plugin_core -Wl,--no-whole-archive
                      msmon_ipc msmon_common ${MSMON_PLUGIN_LIBS} ${CMAKE_DL_LIBS} Threads::Threads)
