/* shared_stub: libmsmonitor.so has no code of its own; everything comes from the static
 * core (shared.cmake links it whole-archive). CMake needs one source per library. */
typedef int msmon_shared_stub_unused;
