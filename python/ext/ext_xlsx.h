/* ext_xlsx: Monitor.save(path) in C with libxlsxwriter (docs/design/outputs.md#xlsx): one sheet per
 * activity kind of the last standalone session, numbers as numeric cells, the file created
 * 0640 next to its final name and renamed into place, parent directories 0750. */
#ifndef MSMON_EXT_XLSX_H
#define MSMON_EXT_XLSX_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* save_xlsx(path) -> bool. Prints the [INFO]/[WARNING]/[ERROR] lines of docs/design/outputs.md#xlsx to
 * sys.stdout; raises only TypeError (path not a str). */
PyObject *ext_xlsx_save(PyObject *mod, PyObject *args, PyObject *kw);

#endif
