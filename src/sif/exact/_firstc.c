/* The first blocks of a batch of candidates, compiled: the hot loop of `sif dupes`.
 * Also two column loops of its stages: size_groups() (stage 1, grouping by size) and
 * take() (the gather of a worker's share of the candidates); see each function.
 *
 * sif.exact.first calls read_first() once per batch of the block rounds (and
 * once more after each row it had to leave to Python). For each row, in the
 * order given (the batch's inode order), it does what the Python loop
 * (sif.exact.first._read_py) does for a file that is as the walk saw it:
 * open the path with the row's flags, fstat the descriptor, compare it with
 * the walk's columns (inode, device, a regular file, size, mtime, ctime),
 * pread the first min(size, block) bytes into a new bytes object, and keep the
 * descriptor open (up to `hold` of them) or close it. In Python that loop cost
 * ~0.7 s of interpreter time on /usr (102k candidates: a stat_result, a path
 * string and a dozen bytecodes a file) on top of its system calls.
 *
 * It decides nothing unusual. At the first row that is not the common case
 * (the open fails, the fstat differs, the read is short or fails, the path
 * cannot be encoded as os.open would or does not fit PATH_MAX, a column is not
 * what it should be) it closes what it opened for that row and returns the
 * row's position: Python reads that row its own careful way (which names the
 * cause, and may drop O_NOATIME for the rest of the table after a
 * PermissionError), then calls again from the next row with the table's
 * flags as they are then. So every warning and every decision is the Python
 * code's, with or without this module.
 *
 * read_first(rows, start, end, dirs, dir_of, names, symlink, dev, ino, size,
 *            mtime_ns, ctime_ns, flags, block, hold, fds, got) -> stop
 *
 * rows: a list of row numbers (ints); rows[start:end] are read. dirs, names:
 * lists of str (a row's path is dirs[dir_of[row]] + names[row]); dir_of: a
 * buffer of 32-bit unsigned ints; symlink: of bytes (0 or 1: which of the two
 * ints of `flags` opens the row); dev, ino, size, mtime_ns, ctime_ns: of 64-bit
 * ints (array 'Q' or 'q'). block: the first block's length; hold: how many
 * descriptors `fds` may hold. For each row read: got[row] = its block (bytes),
 * and fds[row] = its descriptor while len(fds) < hold, else it is closed.
 * stop: the position in rows of the first row left to Python, or `end`.
 *
 * Paths are encoded as os.open encodes them (PyUnicode_EncodeFSDefault: the
 * file-system encoding with surrogateescape, so names that are not UTF-8 open
 * the file the walk saw); an ASCII str is copied as it is (checked at import:
 * the file-system encoding leaves ASCII alone), the others are encoded. The
 * two parts are joined in a stack buffer of PATH_MAX bytes: no path object a
 * file. A longer path, which open() would refuse with ENAMETOOLONG, goes to
 * Python, which says so.
 *
 * Every open is O_CLOEXEC | O_NONBLOCK (the table's flags have both: a FIFO
 * swapped in never blocks the open), retried on EINTR, as is the pread. The
 * GIL is released around each row's system calls. A descriptor is either
 * closed or in `fds` before anything else can fail or raise, so the caller's
 * `finally` that closes `fds` closes every descriptor left open, also after a
 * MemoryError or a Ctrl-C: the signal handlers run (PyErr_CheckSignals) after
 * every row, and an exception they raise is raised from here, the rows done
 * so far in `got` and `fds`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif
#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* 1 when the file-system encoding leaves ASCII as it is (UTF-8, Latin-1, ...): set at import. */
static int ascii_is_fs = 0;

/* The stat time t in nanoseconds, as Python's st_*_ns; 0 if it does not fit 64 bits. */
static int ns_of(struct timespec t, long long *out) {
    long long s;
    if (__builtin_mul_overflow((long long)t.tv_sec, 1000000000LL, &s))
        return 0;
    return !__builtin_add_overflow(s, (long long)t.tv_nsec, out);
}

/* Append str s to path[*len]; 0 if it cannot go there as os.open would encode it. */
static int append(char *path, size_t *len, PyObject *s) {
    const char *data;
    Py_ssize_t n;
    PyObject *enc = NULL;
    if (!PyUnicode_Check(s))
        return 0;
    if (ascii_is_fs && PyUnicode_IS_COMPACT_ASCII(s)) {
        data = (const char *)PyUnicode_DATA(s);
        n = PyUnicode_GET_LENGTH(s);
    } else {
        enc = PyUnicode_EncodeFSDefault(s);
        if (enc == NULL) { /* os.open would raise this too: Python raises it */
            PyErr_Clear();
            return 0;
        }
        data = PyBytes_AS_STRING(enc);
        n = PyBytes_GET_SIZE(enc);
    }
    int ok = (size_t)n < PATH_MAX - *len && memchr(data, '\0', (size_t)n) == NULL;
    if (ok) {
        memcpy(path + *len, data, (size_t)n);
        *len += (size_t)n;
    }
    Py_XDECREF(enc);
    return ok;
}

/* A buffer of integers of one item size, or a TypeError. */
/* A buffer of integers of one item size whose format is one of `formats`, or a TypeError
 * naming the function and the column. */
static int get_typed_column(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize,
                            const char *formats, const char *func, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    if (view->itemsize != itemsize || f[0] == '\0' || f[1] != '\0' ||
        strchr(formats, f[0]) == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: %s must be a buffer of %zd-byte integers (typecodes %s)", func,
                     what, itemsize, formats);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int get_column(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what) {
    return get_typed_column(obj, view, itemsize, "bBhHiIlLqQ", "read_first()", what);
}

enum { NCOLS = 7 };

/* The common case of one row, without the GIL: its descriptor (>= 0) with buf filled, or -1
 * (nothing left open). */
static int read_row(const char *path, int flags, unsigned long long dev, unsigned long long ino,
                    long long size, long long mtime_ns, long long ctime_ns, char *buf,
                    Py_ssize_t n) {
    int fd;
    do {
        fd = open(path, flags | O_CLOEXEC | O_NONBLOCK);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -1;
    struct stat st;
    long long m, c;
    if (fstat(fd, &st) == 0 && (unsigned long long)st.st_ino == ino &&
        (unsigned long long)st.st_dev == dev && S_ISREG(st.st_mode) &&
        (long long)st.st_size == size && ns_of(st.st_mtim, &m) && m == mtime_ns &&
        ns_of(st.st_ctim, &c) && c == ctime_ns) {
        ssize_t r;
        do {
            r = pread(fd, buf, (size_t)n, 0); /* one call, as os.pread: short means careful */
        } while (r < 0 && errno == EINTR);
        if (r == n)
            return fd;
    }
    close(fd);
    return -1;
}

static PyObject *read_first(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *rows, *dirs, *names, *fds, *got;
    PyObject *objs[NCOLS];
    Py_ssize_t start, end, block, hold;
    int flags[2];
    if (!PyArg_ParseTuple(args, "O!nnO!OO!OOOOOO(ii)nnO!O!", &PyList_Type, &rows, &start, &end,
                          &PyList_Type, &dirs, &objs[0], &PyList_Type, &names, &objs[1], &objs[2],
                          &objs[3], &objs[4], &objs[5], &objs[6], &flags[0], &flags[1], &block,
                          &hold, &PyDict_Type, &fds, &PyDict_Type, &got))
        return NULL;
    if (start < 0 || end > PyList_GET_SIZE(rows) || block < 0) {
        PyErr_SetString(PyExc_ValueError, "read_first(): rows[start:end] out of range");
        return NULL;
    }
    /* dir_of, symlink, dev, ino, size, mtime_ns, ctime_ns */
    static const Py_ssize_t itemsizes[NCOLS] = {4, 1, 8, 8, 8, 8, 8};
    static const char *const what[NCOLS] = {"dir_of", "symlink", "dev", "ino",
                                            "size", "mtime_ns", "ctime_ns"};
    Py_buffer views[NCOLS];
    int got_views = 0;
    for (; got_views < NCOLS; got_views++)
        if (get_column(objs[got_views], &views[got_views], itemsizes[got_views],
                       what[got_views]) != 0)
            goto fail;
    Py_ssize_t nrows = PyList_GET_SIZE(names);
    for (int c = 0; c < NCOLS; c++)
        if (views[c].len / itemsizes[c] < nrows)
            nrows = views[c].len / itemsizes[c];
    const uint32_t *dir_of = views[0].buf;
    const uint8_t *symlink = views[1].buf;
    const unsigned long long *dev = views[2].buf, *ino = views[3].buf;
    const long long *size = views[4].buf, *mtime_ns = views[5].buf, *ctime_ns = views[6].buf;

    char path[PATH_MAX];
    Py_ssize_t k = start;
    for (; k < end; k++) {
        PyObject *row = PyList_GET_ITEM(rows, k);
        Py_ssize_t i = PyLong_Check(row) ? PyLong_AsSsize_t(row) : -1;
        if (i < 0 || i >= nrows) {
            PyErr_Clear();
            break; /* not a row of these columns: Python's loop says what is wrong */
        }
        uint32_t d = dir_of[i];
        size_t len = 0;
        if ((Py_ssize_t)d >= PyList_GET_SIZE(dirs) ||
            !append(path, &len, PyList_GET_ITEM(dirs, d)) ||
            !append(path, &len, PyList_GET_ITEM(names, i)))
            break;
        path[len] = '\0';
        Py_ssize_t n = size[i] < block ? (Py_ssize_t)size[i] : block;
        if (n < 0)
            break;
        PyObject *data = PyBytes_FromStringAndSize(NULL, n);
        if (data == NULL)
            goto fail;
        Py_INCREF(row); /* ours while the GIL is released, whatever another thread does */
        int fd;
        Py_BEGIN_ALLOW_THREADS
        fd = read_row(path, flags[symlink[i] != 0], dev[i], ino[i], size[i], mtime_ns[i],
                      ctime_ns[i], PyBytes_AS_STRING(data), n);
        Py_END_ALLOW_THREADS
        if (fd < 0) {
            Py_DECREF(data);
            Py_DECREF(row);
            break;
        }
        int failed = PyDict_SetItem(got, row, data);
        Py_DECREF(data);
        if (!failed && PyDict_GET_SIZE(fds) < hold) {
            PyObject *value = PyLong_FromLong(fd);
            failed = value == NULL || PyDict_SetItem(fds, row, value) != 0;
            Py_XDECREF(value);
            if (!failed)
                fd = -1; /* the caller's to close now */
        }
        Py_DECREF(row);
        if (fd >= 0)
            close(fd); /* EINTR: on Linux the descriptor is closed anyway */
        if (failed || PyErr_CheckSignals() != 0)
            goto fail;
    }
    for (int c = 0; c < NCOLS; c++)
        PyBuffer_Release(&views[c]);
    return PyLong_FromSsize_t(k);
fail:
    for (int c = 0; c < got_views; c++)
        PyBuffer_Release(&views[c]);
    return NULL;
}

/* take(column, rows) -> list or bytes: column[r] for each r of rows (a sequence of ints).
 *
 * The gather that makes a worker's share of the candidates (sif.exact.table._Table):
 * in Python, one map(column.__getitem__, rows) a column cost ~130-240 ns a row (an int
 * object made and read back), 0.16 s for the eight shares of /usr's 101 k
 * candidates. A list column gives a new list of the same objects; a buffer column
 * (an array: 1, 2, 4 or 8 bytes an item, C-contiguous) gives the items' bytes, in
 * the order of rows, for array.frombytes. A row that is not an int, or not in
 * 0 <= r < len(column), raises TypeError, IndexError (or OverflowError);
 * nothing is returned then. The rows are read into C integers before anything is
 * allocated, and no Python code runs in the loops (no __index__ is called; a list
 * column's length is read at each row), so nothing can change under them. */
static Py_ssize_t row_of(PyObject *row) {
    if (!PyLong_Check(row)) {
        PyErr_Format(PyExc_TypeError, "take(): rows must be ints, not %.100s", Py_TYPE(row)->tp_name);
        return -1;
    }
    return PyLong_AsSsize_t(row);
}

static PyObject *take(PyObject *Py_UNUSED(m), PyObject *args) {
    PyObject *column, *rows_in;
    if (!PyArg_ParseTuple(args, "OO:take", &column, &rows_in))
        return NULL;
    PyObject *rows = PySequence_Fast(rows_in, "take(): rows must be a sequence of ints");
    if (rows == NULL)
        return NULL;
    /* The rows as C integers first, read while nothing is allocated: making the result
     * may run the garbage collector, whose finalizers could change a list of rows (as
     * they could under CPython's own tuple(rows)). */
    Py_ssize_t n = PySequence_Fast_GET_SIZE(rows);
    Py_ssize_t *at = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *at);
    PyObject *out = NULL;
    Py_buffer view = {0};
    int have_view = 0;
    if (at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject **items = PySequence_Fast_ITEMS(rows);
    for (Py_ssize_t k = 0; k < n; k++) {
        at[k] = row_of(items[k]);
        if (at[k] == -1 && PyErr_Occurred())
            goto done;
        if (at[k] < 0) {
            PyErr_SetString(PyExc_IndexError, "take(): row out of range");
            goto done;
        }
    }
    if (PyList_CheckExact(column)) {
        out = PyList_New(n);
        for (Py_ssize_t k = 0; out != NULL && k < n; k++) {
            if (at[k] >= PyList_GET_SIZE(column)) { /* read now: the list may have changed */
                Py_CLEAR(out); /* first: the error's allocation may run a collection */
                PyErr_SetString(PyExc_IndexError, "take(): row out of range");
                break;
            }
            PyObject *v = PyList_GET_ITEM(column, at[k]);
            Py_INCREF(v);
            PyList_SET_ITEM(out, k, v);
        }
        goto done;
    }
    if (PyObject_GetBuffer(column, &view, PyBUF_C_CONTIGUOUS) != 0)
        goto done;
    have_view = 1; /* pinned: the column cannot be resized while we hold it */
    Py_ssize_t size = view.itemsize, count = size > 0 ? view.len / size : 0;
    if (size != 1 && size != 2 && size != 4 && size != 8) {
        PyErr_SetString(PyExc_TypeError, "take(): a column of 1, 2, 4 or 8 bytes an item");
        goto done;
    }
    if (n > PY_SSIZE_T_MAX / size) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (at[k] >= count) {
            PyErr_SetString(PyExc_IndexError, "take(): row out of range");
            goto done;
        }
    out = PyBytes_FromStringAndSize(NULL, n * size);
    if (out != NULL) {
        const char *src = view.buf;
        char *dst = PyBytes_AS_STRING(out);
        for (Py_ssize_t k = 0; k < n; k++)
            memcpy(dst + k * size, src + at[k] * size, (size_t)size);
    }
done:
    if (have_view)
        PyBuffer_Release(&view);
    PyMem_Free(at);
    Py_DECREF(rows);
    return out;
}

/* size_groups(size, ino) -> (flat, sizes, lengths): stage 1 of sif dupes (grouping by size).
 *
 * size and ino are the walk's columns (8-byte integers, signed and unsigned, as many of
 * each). The rows whose
 * size another row has, ordered by size, then inode, then row (what a Counter, a
 * compress and two stable sorts gave in Python, ~56 ms for /usr's 117 k files against
 * ~23 ms here, the lists made included); sizes are the shared sizes in increasing order, lengths how many rows
 * have each: the rows of sizes[k] are flat[sum(lengths[:k]) : sum(lengths[:k + 1])]. */
typedef struct {
    long long size;
    unsigned long long ino;
    Py_ssize_t row;
} size_key;

static int by_size(const void *a, const void *b) {
    const size_key *x = a, *y = b;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

static PyObject *size_groups(PyObject *Py_UNUSED(m), PyObject *args) {
    PyObject *size_obj, *ino_obj;
    if (!PyArg_ParseTuple(args, "OO:size_groups", &size_obj, &ino_obj))
        return NULL;
    Py_buffer sv, iv;
    if (get_typed_column(size_obj, &sv, 8, "ql", "size_groups()", "size") != 0)
        return NULL;
    if (get_typed_column(ino_obj, &iv, 8, "QL", "size_groups()", "ino") != 0) {
        PyBuffer_Release(&sv);
        return NULL;
    }
    PyObject *flat = NULL, *sizes = NULL, *lengths = NULL, *result = NULL;
    Py_ssize_t n = sv.len / 8;
    size_key *keys = NULL;
    if (iv.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "size_groups(): size and ino differ in length");
        goto done;
    }
    keys = PyMem_RawMalloc(n ? (size_t)n * sizeof *keys : 1);
    if (keys == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    _Static_assert(sizeof(long long) == 8, "8-byte sizes and inodes");
    const char *size = sv.buf, *ino = iv.buf; /* copied, not cast: a view may be unaligned */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(&keys[i].size, size + 8 * i, 8);
        memcpy(&keys[i].ino, ino + 8 * i, 8);
        keys[i].row = i;
    }
    qsort(keys, (size_t)n, sizeof *keys, by_size);
    Py_END_ALLOW_THREADS
    flat = PyList_New(0);
    sizes = PyList_New(0);
    lengths = PyList_New(0);
    if (flat == NULL || sizes == NULL || lengths == NULL)
        goto done;
    for (Py_ssize_t a = 0, b; a < n; a = b) {
        for (b = a + 1; b < n && keys[b].size == keys[a].size; b++)
            ;
        if (b - a < 2)
            continue;
        PyObject *v = PyLong_FromLongLong(keys[a].size);
        int bad = v == NULL || PyList_Append(sizes, v) != 0;
        Py_XDECREF(v);
        v = bad ? NULL : PyLong_FromSsize_t(b - a);
        bad = bad || v == NULL || PyList_Append(lengths, v) != 0;
        Py_XDECREF(v);
        for (Py_ssize_t k = a; !bad && k < b; k++) {
            v = PyLong_FromSsize_t(keys[k].row);
            bad = v == NULL || PyList_Append(flat, v) != 0;
            Py_XDECREF(v);
        }
        if (bad)
            goto done;
    }
    result = PyTuple_Pack(3, flat, sizes, lengths);
done:
    PyMem_RawFree(keys);
    Py_XDECREF(flat);
    Py_XDECREF(sizes);
    Py_XDECREF(lengths);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&iv);
    return result;
}

static PyMethodDef methods[] = {
    {"read_first", read_first, METH_VARARGS,
     "Open, check and read the first block of rows[start:end] (see the module)."},
    {"take", take, METH_VARARGS,
     "column[r] for each r of rows: a list for a list, the items' bytes for an array."},
    {"size_groups", size_groups, METH_VARARGS,
     "The rows whose size recurs, by size, inode and row; the sizes; their counts."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT,
                                    "_firstc",
                                    "The first blocks of a batch of candidates, compiled.",
                                    -1,
                                    methods,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL};

PyMODINIT_FUNC PyInit__firstc(void) {
    /* Whether an ASCII str can be copied as it is: the file-system encoding of its 127
     * characters (NUL aside) is themselves. Otherwise every part is encoded. */
    char ascii[127];
    for (int c = 1; c < 128; c++)
        ascii[c - 1] = (char)c;
    PyObject *s = PyUnicode_DecodeASCII(ascii, sizeof ascii, NULL);
    if (s == NULL)
        return NULL;
    PyObject *enc = PyUnicode_EncodeFSDefault(s);
    Py_DECREF(s);
    if (enc == NULL)
        return NULL;
    ascii_is_fs = PyBytes_GET_SIZE(enc) == (Py_ssize_t)sizeof ascii &&
                  memcmp(PyBytes_AS_STRING(enc), ascii, sizeof ascii) == 0;
    Py_DECREF(enc);
    return PyModule_Create(&module);
}
