/* libmsmonitor: the shared object has no code of its own; everything comes from the static
 * core (shared.cmake links it whole-archive). CMake needs one source per library. */
typedef int msmon_shared_object_has_no_code_of_its_own;
