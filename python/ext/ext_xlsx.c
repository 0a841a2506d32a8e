/* ext_xlsx: Monitor.save(path) — writes the last standalone session as an xlsx workbook
 * with libxlsxwriter (docs/design/outputs.md#xlsx). The workbook is written to a mkstemp() file in the
 * target directory (so no symlink can be followed) and renamed over the final name. */
#include "ext_xlsx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xlsxwriter.h>

#include "common/utf8.h"
#include "ext_results.h"
#include "msmon/msmonitor.h"

#define PATH_CAP 4096
#define XLSX_MAX_ROWS 1048576u
#define XLSX_MAX_STR 32767u

struct cell {
    const char *s;   /* non-NULL: string cell */
    double v;
};

static const char *const hdr_api[] = {"Name", "Start(us)", "End(us)", "Pid", "Tid", "Correlation ID",
                                      "Duration(us)", NULL};
static const char *const hdr_kernel[] = {"Name", "Start(us)", "End(us)", "Device ID", "Stream ID",
                                         "Correlation ID", "Type", "Duration(us)", NULL};
static const char *const hdr_comm[] = {"Name", "Start(us)", "End(us)", "Device ID", "Stream ID", "Count",
                                       "DataType", "CommName", "AlgType", "Correlation ID",
                                       "Duration(us)", NULL};
static const char *const hdr_marker[] = {"Name", "SourceKind", "Domain", "ID", "Start(us)",
                                         "End(us)", "Pid", "Tid", "Device ID", "Stream ID",
                                         "Duration(us)", NULL};

static const char *const *headers_of(int32_t kind)
{
    switch (kind) {
    case 2:
        return hdr_kernel;
    case 9:
        return hdr_comm;
    case 1:
        return hdr_marker;
    default:
        return hdr_api;
    }
}

static struct cell S(const char *s)
{
    return (struct cell){s ? s : "", 0};
}

static struct cell N(double v)
{
    return (struct cell){NULL, v};
}

/* Row cells in to_tuple() order plus Duration(us); returns the count. */
static size_t row_cells(int32_t kind, const struct msmon_result *m, struct cell *c)
{
    double st = (double)m->start_ns / 1000.0, en = (double)m->end_ns / 1000.0;
    /* Subtract in integers: ns since the epoch do not fit a double's 53 bits exactly. */
    double dur = (double)(int64_t)(m->end_ns - m->start_ns) / 1000.0;
    size_t i = 0;
    switch (kind) {
    case 2:
        c[i++] = S(m->name), c[i++] = N(st), c[i++] = N(en), c[i++] = N(m->device_id);
        c[i++] = N(m->stream_id), c[i++] = N((double)m->correlation_id), c[i++] = S(m->type);
        break;
    case 9:
        c[i++] = S(m->name), c[i++] = N(st), c[i++] = N(en), c[i++] = N(m->device_id);
        c[i++] = N(m->stream_id), c[i++] = N((double)m->count), c[i++] = S(m->data_type);
        c[i++] = S(m->comm_name), c[i++] = S(m->alg_type), c[i++] = N((double)m->correlation_id);
        break;
    case 1:
        c[i++] = S(m->name), c[i++] = N(m->source_kind), c[i++] = S(m->domain), c[i++] = N((double)m->id);
        c[i++] = N(st), c[i++] = N(en), c[i++] = N(m->pid), c[i++] = N(m->tid);
        c[i++] = N(m->device_id), c[i++] = N(m->stream_id);
        break;
    default:
        c[i++] = S(m->name), c[i++] = N(st), c[i++] = N(en), c[i++] = N(m->pid), c[i++] = N(m->tid);
        c[i++] = N((double)m->correlation_id);
        break;
    }
    c[i++] = N(dur);
    return i;
}

/* Strings from msPTI are arbitrary bytes; XML wants valid UTF-8 without control characters
 * and Excel caps a cell at 32767 characters. Bad bytes become '?'. */
static void sanitize(const char *in, char *out, size_t cap)
{
    const unsigned char *s = (const unsigned char *)in;
    size_t n = strlen(in), o = 0;
    for (size_t i = 0; i < n && o + 4 < cap;) {
        size_t l = utf8_seq_len(s + i, n - i);
        if (l == 0 || (l == 1 && s[i] < 0x20 && s[i] != '\t' && s[i] != '\n')) {
            out[o++] = '?';
            i++;
            continue;
        }
        memcpy(out + o, s + i, l);
        o += l;
        i += l;
    }
    out[o] = '\0';
}

static void seterr(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* mkdir -p with mode 0750 for the components we create; the parent itself must not be a
 * symlink. */
static int make_parent(const char *dir, char *err, size_t ecap)
{
    char buf[PATH_CAP + 1];
    size_t n = strlen(dir);
    if (n > PATH_CAP) {
        seterr(err, ecap, "path too long");
        return -ENAMETOOLONG;
    }
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0750) == 0) {
            if (chmod(buf, 0750) < 0) {
                seterr(err, ecap, "cannot chmod %s: %s", buf, strerror(errno));
                return -errno;
            }
        } else if (errno != EEXIST) {
            seterr(err, ecap, "cannot create directory %s: %s", buf, strerror(errno));
            return -errno;
        }
        buf[i] = saved;
    }
    struct stat st;
    if (lstat(dir, &st) < 0) {
        seterr(err, ecap, "cannot stat %s: %s", dir, strerror(errno));
        return -errno;
    }
    if (S_ISLNK(st.st_mode)) {
        seterr(err, ecap, "parent directory is a symlink: %s", dir);
        return -ELOOP;
    }
    if (!S_ISDIR(st.st_mode)) {
        seterr(err, ecap, "parent is not a directory: %s", dir);
        return -ENOTDIR;
    }
    return 0;
}

static int write_sheet(lxw_workbook *wb, int32_t kind, char *sbuf, size_t scap, bool *truncated,
                       char *err, size_t ecap)
{
    lxw_worksheet *ws = workbook_add_worksheet(wb, ext_results_kind_name(kind));
    if (!ws) {
        seterr(err, ecap, "cannot add worksheet %s", ext_results_kind_name(kind));
        return -ENOMEM;
    }
    const char *const *hdr = headers_of(kind);
    for (lxw_col_t c = 0; hdr[c]; c++)
        worksheet_write_string(ws, 0, c, hdr[c], NULL);
    const struct msmon_result *arr = NULL;
    size_t n = 0;
    if (msmon_monitor_results(kind, &arr, &n) < 0 || !arr)
        n = 0;
    if (n > XLSX_MAX_ROWS - 1) {
        n = XLSX_MAX_ROWS - 1;
        *truncated = true;
    }
    for (size_t r = 0; r < n; r++) {
        struct cell cells[16];
        size_t nc = row_cells(kind, &arr[r], cells);
        for (size_t c = 0; c < nc; c++) {
            lxw_error e;
            if (cells[c].s) {
                sanitize(cells[c].s, sbuf, scap);
                e = worksheet_write_string(ws, (lxw_row_t)(r + 1), (lxw_col_t)c, sbuf, NULL);
            } else {
                e = worksheet_write_number(ws, (lxw_row_t)(r + 1), (lxw_col_t)c, cells[c].v, NULL);
            }
            if (e != LXW_NO_ERROR) {
                seterr(err, ecap, "%s", lxw_strerror(e));
                return -EIO;
            }
        }
    }
    return 0;
}

/* Runs without the GIL and with ext_results_lock held. */
static int write_workbook(const char *path, const int32_t *kinds, size_t nk, bool *truncated, char *err,
                          size_t ecap)
{
    int ret = 0;
    char dir[PATH_CAP + 1], tmp[PATH_CAP + 32];
    char *sbuf = NULL;
    lxw_workbook *wb = NULL;
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    ret = make_parent(dir, err, ecap);
    if (ret < 0)
        goto out;
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            seterr(err, ecap, "refusing to write through a symlink: %s", path);
            ret = -ELOOP;
            goto out;
        }
        if (!S_ISREG(st.st_mode)) {
            seterr(err, ecap, "not a regular file: %s", path);
            ret = -EINVAL;
            goto out;
        }
        if (st.st_uid != geteuid() && geteuid() != 0) {
            seterr(err, ecap, "file is owned by uid %u, not the current user", (unsigned)st.st_uid);
            ret = -EPERM;
            goto out;
        }
    }
    snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        seterr(err, ecap, "cannot create %s: %s", tmp, strerror(errno));
        ret = -errno;
        goto out;
    }
    if (fchmod(fd, 0640) < 0) {
        ret = -errno;
        seterr(err, ecap, "cannot chmod %s: %s", tmp, strerror(errno));
        close(fd);
        goto out_unlink;
    }
    close(fd);
    sbuf = malloc(XLSX_MAX_STR + 8);
    if (!sbuf) {
        ret = -ENOMEM;
        seterr(err, ecap, "out of memory");
        goto out_unlink;
    }
    lxw_workbook_options opt = {.constant_memory = LXW_TRUE, .tmpdir = NULL, .use_zip64 = LXW_TRUE};
    wb = workbook_new_opt(tmp, &opt);
    if (!wb) {
        ret = -EIO;
        seterr(err, ecap, "cannot create workbook %s", tmp);
        goto out_unlink;
    }
    for (size_t i = 0; i < nk && ret == 0; i++)
        ret = write_sheet(wb, kinds[i], sbuf, XLSX_MAX_STR + 8, truncated, err, ecap);
    lxw_error e = workbook_close(wb);
    if (ret == 0 && e != LXW_NO_ERROR) {
        seterr(err, ecap, "%s", lxw_strerror(e));
        ret = -EIO;
    }
    if (ret < 0)
        goto out_unlink;
    if (rename(tmp, path) < 0) {
        ret = -errno;
        seterr(err, ecap, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        goto out_unlink;
    }
    goto out;
out_unlink:
    unlink(tmp);
out:
    free(sbuf);
    return ret;
}

PyObject *ext_xlsx_save(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"path", NULL};
    PyObject *pobj;
    char path[PATH_CAP + 8];
    char err[PATH_CAP + 256] = "";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:save_xlsx", kwlist, &pobj))
        return NULL;
    if (!PyUnicode_Check(pobj)) {
        PyErr_Format(PyExc_TypeError, "save_xlsx(): path must be str, not %.100s", Py_TYPE(pobj)->tp_name);
        return NULL;
    }
    Py_ssize_t plen = 0;
    const char *p = PyUnicode_AsUTF8AndSize(pobj, &plen);
    if (!p) {
        PyErr_Clear();
        plen = 0;
    }
    if (!p || plen == 0 || (size_t)plen != strlen(p) || plen > PATH_CAP - 5) {
        PySys_WriteStdout("[ERROR] Invalid file path\n");
        Py_RETURN_FALSE;
    }
    memcpy(path, p, (size_t)plen + 1);
    if (plen < 5 || strcmp(path + plen - 5, ".xlsx") != 0)
        memcpy(path + plen, ".xlsx", 6);
    struct stat st;
    if (lstat(path, &st) == 0)
        PySys_FormatStdout("[WARNING] File already exists: %s, will be overwritten\n", path);

    int32_t raw[32], kinds[32];
    size_t nraw = 0, nk = 0;
    if (msmon_monitor_kinds(raw, 32, &nraw) < 0)
        nraw = 0;
    for (size_t i = 0; i < nraw && i < 32; i++)
        if (ext_results_kind_name(raw[i]))
            kinds[nk++] = raw[i];
    if (nk == 0) {
        PySys_WriteStdout("[WARNING] No valid activity data\n");
        Py_RETURN_FALSE;
    }
    PySys_FormatStdout("[INFO] Start to save activity data file: %s\n", path);
    int ret;
    bool truncated = false;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&ext_results_lock);
    ret = write_workbook(path, kinds, nk, &truncated, err, sizeof(err));
    pthread_mutex_unlock(&ext_results_lock);
    Py_END_ALLOW_THREADS
    if (ret < 0) {
        PySys_FormatStdout("[ERROR] Failed to save file: %s, error: %s\n", path, err);
        Py_RETURN_FALSE;
    }
    if (truncated)
        PySys_FormatStdout("[WARNING] More records than an xlsx sheet holds; kept the first %u rows\n",
                           XLSX_MAX_ROWS - 1);
    PySys_FormatStdout("[INFO] File saved successfully: %s\n", path);
    Py_RETURN_TRUE;
}
