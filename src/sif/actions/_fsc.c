/* A run's hot system calls, compiled: a step's re-check, and the dropped files' closes.
 *
 * recheck(): open both files of a step, fstat them, compare their bytes.
 * sif.actions.verify calls it once per step. Everything it does runs
 * without the GIL (but for a signal check every 64 MiB of a large file),
 * so the run's lanes (threads) re-check on several CPUs at once; in Python,
 * each of the six system calls of a small file's re-check handed the GIL to
 * the other lane and back, and two lanes were no faster than one. The decisions stay in Python: this returns a status and the
 * figures, and verify.py turns a status into the same Changed (or OSError)
 * the Python re-check raises.
 *
 * recheck(keep, kdev, kino, ksize, kmtime, kctime,
 *         drop, ddev, dino, dsize, dmtime, dctime, size, buf_a, buf_b)
 *   -> (status, which, err, kfd, kst, dfd, dst, nread)
 *
 * keep, drop: paths (str or bytes); (kdev, kino): the inode keep must be;
 * (ksize, kmtime, kctime): what its fstat must show (kctime -1: any ctime);
 * likewise for drop; size: the bytes to compare; buf_a, buf_b: two writable
 * buffers of one length (the block). Each file is opened read-only with
 * O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, keep first, and fstat-ed; then exactly
 * `size` bytes of each are read with pread, block by block, and compared.
 *
 * status: 0 same bytes (kfd and dfd are open: the caller closes them); else
 * both descriptors are closed (kfd, dfd = -1) and `which` (0 keep, 1 drop)
 * names the file of 1-4:
 *   1 open failed (err: errno)       2 not a regular file (kst/dst: its stat)
 *   3 another inode than expected    4 size, mtime or ctime differ (its stat)
 *   5 the bytes differ, or a file is shorter now than `size`
 *   6 a read failed (err: errno; which: the file)
 * A signal handler that raises (Ctrl-C) during a large file's compare: both closed, and
 * its exception raised.
 * kst, dst: (mode, ino, dev, nlink, uid, gid, size, atime_ns, mtime_ns,
 * ctime_ns) or None when not fstat-ed. nread: bytes read of both files.
 *
 * close_all(fds): close every descriptor of a list of ints, without the GIL (errors
 * ignored: the descriptors are read-only). The last close of a file whose last name is
 * gone frees its blocks, 0.1-0.6 ms each on ext4; the closer threads of a run
 * (sif.actions.lanes.Closer) closing one descriptor per os.close() took the GIL back
 * after each, and the run's lanes spent a third of their time waiting for it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

enum { OK = 0, OPEN_FAILED = 1, NOT_REGULAR = 2, REPLACED = 3, STAT_DIFFERS = 4, DIFFER = 5,
       READ_FAILED = 6, INTERRUPTED = 7 };

#define CHECK_EVERY (64LL << 20) /* bytes of each file compared between two signal checks */

typedef struct {
    const char *path;
    unsigned long long dev, ino;
    long long size, mtime_ns, ctime_ns; /* ctime_ns -1: any */
    int fd;
    int have_stat;
    struct stat st;
} side;

static long long ns(struct timespec t) { return (long long)t.tv_sec * 1000000000LL + t.tv_nsec; }

/* Open and check one file; a status, errno in *err. */
static int open_side(side *s, int *err) {
    int fd;
    do {
        fd = open(s->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        *err = errno;
        return OPEN_FAILED;
    }
    if (fstat(fd, &s->st) != 0) {
        *err = errno;
        close(fd);
        return OPEN_FAILED;
    }
    s->have_stat = 1;
    if (!S_ISREG(s->st.st_mode)) {
        close(fd);
        return NOT_REGULAR;
    }
    if ((unsigned long long)s->st.st_dev != s->dev || (unsigned long long)s->st.st_ino != s->ino) {
        close(fd);
        return REPLACED;
    }
    if ((long long)s->st.st_size != s->size || ns(s->st.st_mtim) != s->mtime_ns ||
        (s->ctime_ns != -1 && ns(s->st.st_ctim) != s->ctime_ns)) {
        close(fd);
        return STAT_DIFFERS;
    }
    s->fd = fd;
    return OK;
}

/* Read up to n bytes at offset into buf (short only at the file's end); -1 and errno on error. */
static Py_ssize_t read_full(int fd, char *buf, Py_ssize_t n, long long offset) {
    Py_ssize_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, (size_t)(n - got), (off_t)(offset + got));
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += r;
    }
    return got;
}

/* Compare the first size bytes of both open files; a status, the file and errno if one fails.
 * Called without the GIL (*ts: the thread state it was released from); every CHECK_EVERY bytes
 * of a large file it takes the GIL back for PyErr_CheckSignals, so that Ctrl-C stops a long
 * compare as it stops the Python one (between two blocks): INTERRUPTED, the exception set. */
static int compare(side *k, side *d, long long size, char *a, char *b, Py_ssize_t block,
                   long long *nread, int *which, int *err, PyThreadState **ts) {
    long long offset = 0, since = 0;
    while (offset < size) {
        if (since >= CHECK_EVERY) {
            since = 0;
            PyEval_RestoreThread(*ts);
            int interrupted = PyErr_CheckSignals();
            *ts = PyEval_SaveThread();
            if (interrupted)
                return INTERRUPTED;
        }
        Py_ssize_t n = (Py_ssize_t)((size - offset) < block ? (size - offset) : block);
        Py_ssize_t na = read_full(k->fd, a, n, offset);
        if (na < 0) {
            *which = 0;
            *err = errno;
            return READ_FAILED;
        }
        Py_ssize_t nb = read_full(d->fd, b, n, offset);
        if (nb < 0) {
            *which = 1;
            *err = errno;
            return READ_FAILED;
        }
        *nread += na + nb;
        if (na != n || nb != n || memcmp(a, b, (size_t)n) != 0)
            return DIFFER;
        offset += n;
        since += n;
    }
    return OK;
}

static PyObject *stat_tuple(const side *s) {
    if (!s->have_stat)
        Py_RETURN_NONE;
    const struct stat *st = &s->st;
    return Py_BuildValue("(KKKKKKLLLL)", (unsigned long long)st->st_mode,
                         (unsigned long long)st->st_ino, (unsigned long long)st->st_dev,
                         (unsigned long long)st->st_nlink, (unsigned long long)st->st_uid,
                         (unsigned long long)st->st_gid, (long long)st->st_size, ns(st->st_atim),
                         ns(st->st_mtim), ns(st->st_ctim));
}

static PyObject *recheck(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *kpath = NULL, *dpath = NULL;
    side k, d;
    long long size;
    Py_buffer ba, bb;
    memset(&k, 0, sizeof k);
    memset(&d, 0, sizeof d);
    k.fd = d.fd = -1;
    if (!PyArg_ParseTuple(args, "O&KKLLLO&KKLLLLw*w*", PyUnicode_FSConverter, &kpath, &k.dev,
                          &k.ino, &k.size, &k.mtime_ns, &k.ctime_ns, PyUnicode_FSConverter, &dpath,
                          &d.dev, &d.ino, &d.size, &d.mtime_ns, &d.ctime_ns, &size, &ba, &bb))
        goto fail_args;
    if (ba.len != bb.len || ba.len <= 0 || size < 0) {
        PyErr_SetString(PyExc_ValueError, "two buffers of one length, and a size >= 0");
        PyBuffer_Release(&ba);
        PyBuffer_Release(&bb);
        goto fail_args;
    }
    k.path = PyBytes_AS_STRING(kpath);
    d.path = PyBytes_AS_STRING(dpath);
    int status, which = 0, err = 0;
    long long nread = 0;
    PyThreadState *ts = PyEval_SaveThread();
    status = open_side(&k, &err);
    if (status == OK) {
        which = 1;
        status = open_side(&d, &err);
        if (status == OK) {
            status = compare(&k, &d, size, ba.buf, bb.buf, ba.len, &nread, &which, &err, &ts);
            if (status != OK) {
                close(k.fd);
                close(d.fd);
                k.fd = d.fd = -1;
            }
        } else {
            close(k.fd);
            k.fd = -1;
        }
    }
    PyEval_RestoreThread(ts);
    PyBuffer_Release(&ba);
    PyBuffer_Release(&bb);
    Py_DECREF(kpath);
    Py_DECREF(dpath);
    if (status == INTERRUPTED) /* both closed: the signal handler's exception */
        return NULL;
    PyObject *kst = stat_tuple(&k), *dst = stat_tuple(&d);
    PyObject *out = NULL;
    if (kst && dst)
        out = Py_BuildValue("(iiiiOiOL)", status, which, err, k.fd, kst, d.fd, dst, nread);
    Py_XDECREF(kst);
    Py_XDECREF(dst);
    if (out == NULL && status == OK) { /* out of memory: close what would leak */
        close(k.fd);
        close(d.fd);
    }
    return out;
fail_args:
    Py_XDECREF(kpath);
    Py_XDECREF(dpath);
    return NULL;
}

static PyObject *close_all(PyObject *self, PyObject *arg) {
    (void)self;
    PyObject *seq = PySequence_Fast(arg, "close_all() takes a list of descriptors");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int *fds = PyMem_Malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (fds == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long fd = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (fd == -1 && PyErr_Occurred()) {
            PyMem_Free(fds);
            Py_DECREF(seq);
            return NULL;
        }
        if (fd < INT_MIN || fd > INT_MAX) { /* (int) would close another descriptor */
            PyErr_SetString(PyExc_OverflowError, "close_all(): a descriptor out of range");
            PyMem_Free(fds);
            Py_DECREF(seq);
            return NULL;
        }
        fds[i] = (int)fd;
    }
    Py_DECREF(seq);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        close(fds[i]); /* EINTR: on Linux the descriptor is closed anyway */
    Py_END_ALLOW_THREADS
    PyMem_Free(fds);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"recheck", recheck, METH_VARARGS,
     "Open, fstat and compare the kept copy and the file to drop (see the module)."},
    {"close_all", close_all, METH_O, "Close every descriptor of a list, without the GIL."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fsc", "A run's hot system calls, without the GIL.", -1, methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fsc(void) { return PyModule_Create(&module); }
