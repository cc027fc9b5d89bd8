/* The reads of a batch of small files for `sif index`, compiled (sif.index.scan.read_plain).
 *
 * read_files(files, limit) -> (buf, starts, lengths)
 *
 * files: a list of (path, dev, ino, ...) tuples (the walk's items: only the first three are
 * read); limit: the size from which a file is not read here. Each file is opened as
 * sif.fileio.open_regular opens it (O_RDONLY | O_NONBLOCK | O_CLOEXEC, links followed) and
 * kept only if fstat says it is a regular file, the walk's (dev, ino), of fewer than `limit`
 * bytes; then all of them are read, each into its slot of one bytearray `buf`: size + 1
 * bytes, so that a file that grew since its fstat fills its slot and is refused. For file i,
 * starts[i] is its slot's offset in buf and lengths[i] the bytes read, or -1 when it was not
 * read whole here (it could not be opened, is not the walk's regular file, is too large,
 * grew, or a read failed): the caller reads that one its own careful way, which names the
 * cause. So every decision and every warning stays the Python code's.
 *
 * The Python loop this replaces (read_plain's open_regular and readv a file) cost a few
 * microseconds of interpreter time a file on top of its system calls (an os.stat_result,
 * memoryview slices, two readv calls through Python): about a tenth of a small file's
 * whole read. The GIL is released around the system calls; a path that cannot be encoded
 * as os.open encodes it (PyUnicode_EncodeFSDefault) or holds a NUL, or is not a str, or a
 * dev or ino that is not an int, is left to Python (the walk's items are never so; Python
 * may then read or refuse it otherwise). An item that is not a tuple of three or more is a
 * TypeError. All descriptors are closed before this returns, also on an error.
 *
 * head_classes(buf, starts, lengths, sample) -> bytes
 *
 * What sif.content.plain_kind needs of each file's first `sample` bytes, for a batch in one
 * pass: its magic number's class and whether it is binary (sif.filetypes.sniff_magic and
 * kind_of, written again here; tests/index/test_plainscan.py holds the two to each other).
 * Built with -O3, its count of control bytes is vectorised: 39.7 MB of heads in 5-7 ms.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../_hiddenlist.h"

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

typedef struct {
    const char *path; /* borrowed from enc[i] */
    unsigned long long dev, ino;
    int fd;
    long long size; /* the fstat's size */
    Py_ssize_t start;
    long long got; /* -1: not read here */
} item_t;

/* Open and check one file (no GIL): its fd, or -1. */
static int open_one(item_t *it, long long limit) {
    int fd;
    do {
        fd = open(it->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (unsigned long long)st.st_dev != it->dev || (unsigned long long)st.st_ino != it->ino ||
        st.st_size < 0 || (long long)st.st_size >= limit) {
        close(fd);
        return -1;
    }
    it->size = (long long)st.st_size;
    return fd;
}

/* Read one opened file into its slot of `room` bytes (no GIL): the bytes read, or -1 when
 * it filled the slot (it grew) or a read failed. */
static long long read_one(int fd, char *slot, long long room) {
    long long got = 0;
    while (got < room) {
        ssize_t r = read(fd, slot + got, (size_t)(room - got));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += r;
    }
    return got < room ? got : -1;
}


static PyObject *read_files(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *files;
    long long limit;
    if (!PyArg_ParseTuple(args, "O!L", &PyList_Type, &files, &limit))
        return NULL;
    /* A tuple of the items: ours, whatever code run meanwhile (a __del__ during an
     * allocation) does to the caller's list. */
    PyObject *all = PyList_AsTuple(files);
    Py_ssize_t n = all != NULL ? PyTuple_GET_SIZE(all) : 0;
    PyObject *enc = new_list_hidden(n); /* the encoded paths, alive without the GIL */
    item_t *items = PyMem_Calloc(n > 0 ? (size_t)n : 1, sizeof(item_t));
    PyObject *buf = NULL, *starts = NULL, *lengths = NULL, *out = NULL;
    if (items != NULL)
        for (Py_ssize_t i = 0; i < n; i++) { /* before anything can fail: nothing to close */
            items[i].fd = -1;
            items[i].got = -1;
        }
    if (all == NULL || enc == NULL || items == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(all, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) < 3) {
            PyErr_SetString(PyExc_TypeError, "read_files(): an item is not a (path, dev, ino, ...)");
            goto done;
        }
        PyObject *b = NULL;
        unsigned long long dev = 0, ino = 0;
        if (PyUnicode_Check(PyTuple_GET_ITEM(t, 0)))
            b = PyUnicode_EncodeFSDefault(PyTuple_GET_ITEM(t, 0));
        if (b != NULL)
            dev = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 1));
        if (b != NULL && !PyErr_Occurred())
            ino = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(t, 2));
        if (b == NULL || PyErr_Occurred() ||
            memchr(PyBytes_AS_STRING(b), '\0', (size_t)PyBytes_GET_SIZE(b)) != NULL) {
            PyErr_Clear(); /* left to Python, which says what is wrong */
            Py_XDECREF(b);
            Py_INCREF(Py_None);
            PyList_SET_ITEM(enc, i, Py_None);
            continue;
        }
        PyList_SET_ITEM(enc, i, b); /* steals b */
        items[i].path = PyBytes_AS_STRING(b);
        items[i].dev = dev;
        items[i].ino = ino;
    }
    Py_ssize_t total = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i].path != NULL)
            items[i].fd = open_one(&items[i], limit);
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i].fd < 0)
            continue;
        if (items[i].size + 1 > PY_SSIZE_T_MAX - total) {
            PyErr_NoMemory();
            goto done;
        }
        items[i].start = total;
        total += (Py_ssize_t)items[i].size + 1; /* one byte more: a file that grew */
    }
    buf = PyByteArray_FromStringAndSize(NULL, total);
    if (buf == NULL)
        goto done;
    char *base = PyByteArray_AS_STRING(buf);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (items[i].fd < 0)
            continue;
        items[i].got = read_one(items[i].fd, base + items[i].start, items[i].size + 1);
        close(items[i].fd); /* EINTR: on Linux the descriptor is closed anyway */
        items[i].fd = -1;
    }
    Py_END_ALLOW_THREADS
    starts = new_list_hidden(n);
    lengths = new_list_hidden(n);
    if (starts == NULL || lengths == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *s = PyLong_FromSsize_t(items[i].start);
        PyObject *g = PyLong_FromLongLong(items[i].got);
        if (s == NULL || g == NULL) {
            Py_XDECREF(s);
            Py_XDECREF(g);
            goto done;
        }
        PyList_SET_ITEM(starts, i, s);
        PyList_SET_ITEM(lengths, i, g);
    }
    PyObject_GC_Track(starts); /* full now */
    PyObject_GC_Track(lengths);
    out = PyTuple_Pack(3, buf, starts, lengths);
done:
    if (items != NULL) {
        for (Py_ssize_t i = 0; i < n; i++)
            if (items[i].fd >= 0)
                close(items[i].fd);
        PyMem_Free(items);
    }
    Py_XDECREF(enc);
    Py_XDECREF(all);
    Py_XDECREF(buf);
    Py_XDECREF(starts);
    Py_XDECREF(lengths);
    if (out == NULL && !PyErr_Occurred())
        PyErr_NoMemory();
    return out;
}

/* What sif.filetypes.sniff_magic says of a head, as a class: 0 no magic, 1 a compression
 * or an archive (gzip, bzip2, xz, zstd, zip, tar), 2 another (ELF, PostScript). */
static int magic_class(const unsigned char *h, Py_ssize_t n) {
#define STARTS(lit) (n >= (Py_ssize_t)(sizeof(lit) - 1) && memcmp(h, lit, sizeof(lit) - 1) == 0)
    if (STARTS("\x1f\x8b") || STARTS("\xfd" "7zXZ\x00") || STARTS("\x28\xb5\x2f\xfd") ||
        STARTS("PK\x03\x04") || STARTS("PK\x05\x06"))
        return 1;
    if (STARTS("\x7f" "ELF"))
        return 2;
    if (n >= 10 && memcmp(h, "BZh", 3) == 0 && h[3] >= '1' && h[3] <= '9' &&
        (memcmp(h + 4, "1AY&SY", 6) == 0 || memcmp(h + 4, "\x17rE8P\x90", 6) == 0))
        return 1;
    if (n >= 262 && memcmp(h + 257, "ustar", 5) == 0)
        return 1;
    if (STARTS("%!") || STARTS("\xef\xbb\xbf%!") || STARTS("\x04%!"))
        return 2;
    return 0;
#undef STARTS
}

/* sif.filetypes.kind_of of a head: 1 binary (a NUL, or more than 30% of its bytes control
 * characters other than BS, TAB, LF, VT, FF, CR, ESC; DEL too), 0 text. */
static int is_binary(const unsigned char *h, Py_ssize_t n) {
    if (memchr(h, 0, (size_t)n) != NULL)
        return 1;
    /* Branch-free, so that the compiler counts 16 or 32 bytes at a time. */
    Py_ssize_t odd = 0;
    for (Py_ssize_t i = 0; i < n;) {
        Py_ssize_t stop = n - i > 255 ? i + 255 : n;
        unsigned char part = 0; /* at most 255 a block */
        for (; i < stop; i++) {
            unsigned char c = h[i];
            part += (unsigned char)(((c < 32) & (c != 27) & ((unsigned char)(c - 8) > 5)) |
                                    (c == 127));
        }
        odd += part;
    }
    return (double)odd > 0.30 * (double)n;
}

static PyObject *head_classes(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer buf;
    PyObject *starts, *lengths;
    Py_ssize_t sample;
    if (!PyArg_ParseTuple(args, "y*O!O!n", &buf, &PyList_Type, &starts, &PyList_Type, &lengths,
                          &sample))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = PyList_GET_SIZE(starts);
    if (PyList_GET_SIZE(lengths) != n) {
        PyErr_SetString(PyExc_ValueError, "head_classes(): starts and lengths differ");
        goto done;
    }
    if (sample < 0) {
        PyErr_SetString(PyExc_ValueError, "head_classes(): a negative sample");
        goto done;
    }
    out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL)
        goto done;
    unsigned char *code = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t start = PyLong_AsSsize_t(PyList_GET_ITEM(starts, i));
        if (start == -1 && PyErr_Occurred()) {
            Py_CLEAR(out);
            goto done;
        }
        Py_ssize_t got = PyLong_AsSsize_t(PyList_GET_ITEM(lengths, i));
        if (got == -1 && PyErr_Occurred()) {
            Py_CLEAR(out);
            goto done;
        }
        if (got < 0) {
            code[i] = 255;
            continue;
        }
        if (start < 0 || start > buf.len || got > buf.len - start) {
            PyErr_SetString(PyExc_ValueError, "head_classes(): a file outside the buffer");
            Py_CLEAR(out);
            goto done;
        }
        Py_ssize_t len = got < sample ? got : sample;
        const unsigned char *h = (const unsigned char *)buf.buf + start;
        code[i] = (unsigned char)(2 * magic_class(h, len) + is_binary(h, len));
    }
done:
    PyBuffer_Release(&buf);
    return out;
}

static PyMethodDef methods[] = {
    {"read_files", read_files, METH_VARARGS,
     "Open, check and read whole each small file of a batch into one buffer (see the "
     "module)."},
    {"head_classes", head_classes, METH_VARARGS,
     "head_classes(buf, starts, lengths, sample) -> bytes: for each file, 255 when its "
     "length is negative (not read), else 2 * magic + binary of its first `sample` bytes: "
     "magic 0 none, 1 a compression or an archive, 2 ELF or PostScript "
     "(sif.filetypes.sniff_magic); binary as sif.filetypes.kind_of."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT,
                                    "_readc",
                                    "The reads of a batch of small files, compiled.",
                                    -1,
                                    methods,
                                    NULL,
                                    NULL,
                                    NULL,
                                    NULL};

PyMODINIT_FUNC PyInit__readc(void) { return PyModule_Create(&module); }
