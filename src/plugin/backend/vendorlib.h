/* vendorlib: what loading a vendor activity library shares between msPTI (mspti_lib) and CUPTI
 * (cupti_lib): resolving its symbols into a table of function pointers by a {name, offset,
 * mandatory} list, trying one candidate file, and the list of places searched that the
 * not-found message shows (docs/design/session.md#backends). */
#ifndef MSMON_PLUGIN_VENDORLIB_H
#define MSMON_PLUGIN_VENDORLIB_H

#include <stdbool.h>
#include <stddef.h>

struct vendorlib_sym {
    const char *name;  /* the library's symbol */
    size_t off;        /* where its address goes in the table */
    bool mandatory;    /* a library without it is not one we can use */
};
#define VENDORLIB_SYM(type, field, sym, mand) { #sym, offsetof(type, field), mand }

/* What a table is filled from, and how its file and handle are kept. */
struct vendorlib_desc {
    const char *soname;              /* "libmspti.so": names the library in messages */
    const char *tag;                 /* "mspti": the DEBUG lines' prefix */
    const struct vendorlib_sym *syms;
    size_t nsyms;
    size_t table_size;               /* sizeof the table struct, zeroed before it is filled */
    size_t dl_off;                   /* offsetof its `void *dl` */
    size_t path_off, path_cap;       /* offsetof and size of its `char path[]` */
};

/* One candidate: dlopen(path, flags) and every symbol into *table; the table's path is the file
 * (for a bare soname, the file the loader mapped) and its dl the handle, never closed (records
 * point into the library). 0, or -ENOENT: not loadable (DEBUG line) or a mandatory symbol is
 * missing (ERROR line naming it; the handle is closed). */
int vendorlib_try(const struct vendorlib_desc *d, const char *path, int flags, void *table);
/* Append "what" to the comma list of places searched (list has cap bytes, stays terminated). */
void vendorlib_note(char *list, size_t cap, const char *what);

#endif
