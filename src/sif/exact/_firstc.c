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
 *            mtime_ns, ctime_ns, flags, block, hold, fds, got,
 *            [helpers, chunk, min_share, chunk_ns]) -> stop
 *
 * The last four are optional and positional (defaults 0, 256, 16 and 20 ms).
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
 * Python, which says so. Every object read from `rows`, `dirs` and `names` is
 * held (a reference) while anything is allocated, and their lengths are read
 * again at each row: an allocation may run finalizers that change them.
 *
 * Every open is O_CLOEXEC | O_NONBLOCK (the table's flags have both: a FIFO
 * swapped in never blocks the open), retried on EINTR, as is the pread.
 *
 * The rows go in chunks (a call's first of `min_share` rows, each next one twice
 * the last, up to `chunk`, at most 256). With the GIL, a chunk's paths are
 * joined into one arena and its blocks made; without it, this thread and up to
 * `helpers` threads (each started for `min_share` rows at least, joined before
 * the GIL is taken again) take the chunk's rows one by one from an atomic
 * counter and make their system calls; then, with the GIL, the rows read go
 * into `got` and `fds` in order, up to the first row that is not the common
 * case. A row after that one may have been read by another thread meanwhile:
 * it is closed and dropped, and read again by the next call, with the flags as
 * they are then (as is a row read past a chunk's time limit, below, by the
 * next chunk). So `got`, `fds`, the return value and every decision are those
 * of one thread reading row after row; only the order of the reads within a
 * chunk, and a few reads again, differ.
 * On the Linux sources (64 k candidates, warm cache) one helper thread takes
 * the stage from 0.44 s to 0.32 s, for 0.03 s more CPU; a thread costs about
 * 20 us to start.
 *
 * A descriptor is either closed or in `fds` before anything else can fail or
 * raise, so the caller's `finally` that closes `fds` closes every descriptor
 * left open, also after a MemoryError or a Ctrl-C: the signal handlers run
 * (PyErr_CheckSignals) after every chunk (the helpers are joined by then),
 * and an exception they raise is raised from here, the rows done so far in
 * `got` and `fds`.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <pthread.h>
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
        Py_INCREF(s); /* the encoding allocates: a finalizer could drop s from its list */
        enc = PyUnicode_EncodeFSDefault(s);
        Py_DECREF(s);
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

/* The common case of one row, without the GIL (any thread): its descriptor (>= 0) with buf
 * filled, or -1 (nothing left open). */
static int read_row(const char *path, int flags, unsigned long long dev, unsigned long long ino,
                    long long size, long long mtime_ns, long long ctime_ns, char *buf,
                    Py_ssize_t n) {
    int fd;
    do {
        fd = open(path, flags | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
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

enum { MAX_CHUNK = 256 }; /* rows between two looks at the signal handlers, at most */
enum { MAX_HELPERS = 7 };  /* helper threads a call starts at most */
enum { CLOSED = -3 };      /* fd[] of a row read and closed at once (no room in fds) */

/* One chunk of rows, prepared with the GIL and read without it by this thread and the
 * helpers: each takes the next row (an atomic counter) until none is left, and every row
 * taken gets its fd[]: a descriptor, CLOSED, -1 (not the common case) or -2 (not read).
 *
 * Two atomic minimums end a chunk early. A row that is not the common case lowers
 * `stop`: Python reads it next. A row taken CHUNK_NS after the chunk began (a slow disk)
 * lowers `cut` instead of being read: the rows from there go to the next chunk, after
 * the signal handlers have run. Row 0 is always read (progress). A row past either is
 * not read. Every row before min(stop, cut) was read: both only go down, so a row
 * skipped was past them for good. A row read at or past `room` (the descriptors `fds`
 * can still take) is closed at once: a chunk holds no more descriptors open than the
 * threads that read it, beyond those that will go into `fds`. */
struct chunk {
    const int *flags;
    const uint8_t *symlink;
    const unsigned long long *dev, *ino;
    const long long *size, *mtime_ns, *ctime_ns;
    const char *arena;  /* the rows' paths, NUL-terminated, at off[] */
    Py_ssize_t m;       /* rows in this chunk */
    Py_ssize_t room;    /* rows from 0 whose descriptors fds can take */
    long long deadline; /* CLOCK_MONOTONIC ns: no row is begun after it */
    Py_ssize_t next;    /* atomic: the next row to take */
    Py_ssize_t stop;    /* atomic: the first row not the common case, or m */
    Py_ssize_t cut;     /* atomic: the first row left for lack of time, or m */
    size_t off[MAX_CHUNK];
    Py_ssize_t idx[MAX_CHUNK], len[MAX_CHUNK];
    char *buf[MAX_CHUNK];
    int fd[MAX_CHUNK];
    PyObject *row[MAX_CHUNK], *data[MAX_CHUNK];
};

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* *at = min(*at, j), atomically. */
static void lower(Py_ssize_t *at, Py_ssize_t j) {
    Py_ssize_t seen = __atomic_load_n(at, __ATOMIC_RELAXED);
    while (j < seen &&
           !__atomic_compare_exchange_n(at, &seen, j, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ; /* a failed exchange reloads seen */
}

static void run_chunk(struct chunk *J) {
    for (;;) {
        Py_ssize_t j = __atomic_fetch_add(&J->next, 1, __ATOMIC_RELAXED);
        if (j >= J->m)
            return;
        if (j > __atomic_load_n(&J->stop, __ATOMIC_RELAXED) ||
            j >= __atomic_load_n(&J->cut, __ATOMIC_RELAXED)) {
            J->fd[j] = -2; /* past a row left to Python, or to the next chunk */
            continue;
        }
        if (j > 0 && now_ns() > J->deadline) {
            lower(&J->cut, j);
            J->fd[j] = -2;
            continue;
        }
        Py_ssize_t i = J->idx[j];
        int fd = read_row(J->arena + J->off[j], J->flags[J->symlink[i] != 0], J->dev[i], J->ino[i],
                          J->size[i], J->mtime_ns[i], J->ctime_ns[i], J->buf[j], J->len[j]);
        if (fd < 0)
            lower(&J->stop, j);
        else if (j >= J->room) {
            close(fd); /* EINTR: on Linux the descriptor is closed anyway */
            fd = CLOSED;
        }
        J->fd[j] = fd;
    }
}

static void *helper_main(void *arg) {
    run_chunk(arg);
    return NULL;
}

/* The first m rows prepared in J given back (an error while preparing the next). */
static void release(struct chunk *J, Py_ssize_t m) {
    for (Py_ssize_t j = 0; j < m; j++) {
        Py_CLEAR(J->data[j]);
        Py_CLEAR(J->row[j]);
    }
}

/* Helper threads' attributes: a small stack (they call open, fstat, pread, close). */
static pthread_attr_t attr;

static PyObject *read_first(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *rows, *dirs, *names, *fds, *got;
    PyObject *objs[NCOLS];
    Py_ssize_t start, end, block, hold;
    int flags[2], helpers = 0;
    Py_ssize_t chunk = MAX_CHUNK, min_share = 16;
    long long chunk_ns = 20 * 1000 * 1000;
    if (!PyArg_ParseTuple(args, "O!nnO!OO!OOOOOO(ii)nnO!O!|innL", &PyList_Type, &rows, &start, &end,
                          &PyList_Type, &dirs, &objs[0], &PyList_Type, &names, &objs[1], &objs[2],
                          &objs[3], &objs[4], &objs[5], &objs[6], &flags[0], &flags[1], &block,
                          &hold, &PyDict_Type, &fds, &PyDict_Type, &got, &helpers, &chunk,
                          &min_share, &chunk_ns))
        return NULL;
    if (start < 0 || end > PyList_GET_SIZE(rows) || block < 0) {
        PyErr_SetString(PyExc_ValueError, "read_first(): rows[start:end] out of range");
        return NULL;
    }
    if (hold < 0 || helpers < 0 || chunk < 1 || chunk > MAX_CHUNK || min_share < 1 ||
        chunk_ns < 0 || chunk_ns > 3600LL * 1000000000LL) {
        PyErr_Format(PyExc_ValueError,
                     "read_first(): hold >= 0, helpers >= 0, chunk 1 to %d, min_share >= 1 and "
                     "chunk_ns 0 to an hour, please",
                     (int)MAX_CHUNK);
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

    Py_ssize_t k = start;
    struct chunk J = {0};
    J.flags = flags;
    J.symlink = symlink;
    J.dev = dev;
    J.ino = ino;
    J.size = size;
    J.mtime_ns = mtime_ns;
    J.ctime_ns = ctime_ns;
    size_t cap = 16 * 1024;
    char *arena = PyMem_Malloc(cap);
    if (arena == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    char path[PATH_MAX];
    int stopped = 0; /* a row that is not the common case was met while preparing */
    /* A call's first chunk is small (min_share rows: no helper), and each next one twice
     * the last, up to `chunk`: a call after a row left to Python (a tree of unreadable
     * files: one every few rows) prepares a few rows and starts no thread. With full
     * chunks from the start, 6,000 such rows cost 322 ms with one helper against 24 ms
     * for the loop of one thread. */
    Py_ssize_t next_chunk = min_share < chunk ? min_share : chunk;
    while (k < end && !stopped) {
        /* With the GIL: the rows' paths into the arena and their blocks made. */
        Py_ssize_t m = 0;
        size_t used = 0;
        Py_ssize_t this_chunk = next_chunk;
        next_chunk = next_chunk < chunk / 2 ? 2 * next_chunk : chunk;
        for (; m < this_chunk && k + m < end; m++) {
            if (k + m >= PyList_GET_SIZE(rows)) { /* read now: a finalizer may have changed it */
                stopped = 1;
                break;
            }
            PyObject *row = PyList_GET_ITEM(rows, k + m);
            Py_INCREF(row); /* ours from now: making a block may run finalizers */
            Py_ssize_t i = PyLong_Check(row) ? PyLong_AsSsize_t(row) : -1;
            size_t len = 0;
            Py_ssize_t n = -1;
            if (i >= 0 && i < nrows && i < PyList_GET_SIZE(names) &&
                (Py_ssize_t)dir_of[i] < PyList_GET_SIZE(dirs) &&
                append(path, &len, PyList_GET_ITEM(dirs, dir_of[i])) && i < PyList_GET_SIZE(names) &&
                append(path, &len, PyList_GET_ITEM(names, i)))
                n = size[i] < block ? (Py_ssize_t)size[i] : block;
            if (n < 0) { /* not a row of these columns, or a path open() would refuse: */
                PyErr_Clear(); /* Python's loop says what is wrong */
                Py_DECREF(row);
                stopped = 1;
                break;
            }
            if (used + len + 1 > cap) {
                size_t want = cap;
                while (used + len + 1 > want)
                    want *= 2;
                char *bigger = PyMem_Realloc(arena, want);
                if (bigger == NULL) {
                    PyErr_NoMemory();
                    Py_DECREF(row);
                    release(&J, m);
                    goto fail_arena;
                }
                arena = bigger;
                cap = want;
            }
            memcpy(arena + used, path, len);
            arena[used + len] = '\0';
            PyObject *data = PyBytes_FromStringAndSize(NULL, n);
            if (data == NULL) {
                Py_DECREF(row);
                release(&J, m);
                goto fail_arena;
            }
            J.row[m] = row;
            J.data[m] = data;
            J.buf[m] = PyBytes_AS_STRING(data);
            J.len[m] = n;
            J.idx[m] = i;
            J.off[m] = used;
            used += len + 1;
        }
        if (m == 0)
            break;
        /* Without the GIL: the system calls, shared with the helper threads. */
        J.arena = arena;
        J.m = m;
        J.room = hold - PyDict_GET_SIZE(fds);
        J.next = 0;
        J.stop = m;
        J.cut = m;
        Py_BEGIN_ALLOW_THREADS
        J.deadline = now_ns() + chunk_ns;
        pthread_t tid[MAX_HELPERS];
        int started = 0;
        int want = helpers < MAX_HELPERS ? helpers : MAX_HELPERS;
        if (want > m / min_share - 1) /* each thread min_share rows at least */
            want = (int)(m / min_share - 1);
        for (; started < want; started++)
            if (pthread_create(&tid[started], &attr, helper_main, &J) != 0)
                break; /* no thread to be had: fewer read */
        run_chunk(&J);
        for (int t = 0; t < started; t++)
            pthread_join(tid[t], NULL);
        Py_END_ALLOW_THREADS
        /* With the GIL again: each row read up to the first that is not the common case
         * (or was left for lack of time), in order, into got (and fds while they fit);
         * every other descriptor closed. */
        Py_ssize_t stop = J.stop, limit = J.cut < stop ? J.cut : stop;
        int failed = 0;
        for (Py_ssize_t j = 0; j < m; j++) {
            int fd = J.fd[j];
            if (j < limit && !failed) {
                failed = PyDict_SetItem(got, J.row[j], J.data[j]) != 0;
                if (!failed && fd >= 0 && PyDict_GET_SIZE(fds) < hold) {
                    PyObject *value = PyLong_FromLong(fd);
                    failed = value == NULL || PyDict_SetItem(fds, J.row[j], value) != 0;
                    Py_XDECREF(value);
                    if (!failed)
                        fd = -1; /* the caller's to close now */
                }
            }
            if (fd >= 0)
                close(fd); /* EINTR: on Linux the descriptor is closed anyway */
            Py_CLEAR(J.data[j]);
            Py_CLEAR(J.row[j]);
        }
        if (failed)
            goto fail_arena;
        k += limit;
        if (limit < m) {
            if (limit == stop)
                break; /* rows[k] to Python */
            stopped = 0; /* cut for time: rows[k] on is read again, the row met preparing too */
        }
        if (PyErr_CheckSignals() != 0)
            goto fail_arena;
    }
    PyMem_Free(arena);
    for (int c = 0; c < NCOLS; c++)
        PyBuffer_Release(&views[c]);
    return PyLong_FromSsize_t(k);
fail_arena:
    PyMem_Free(arena);
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
    if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, 256 * 1024) != 0) {
        PyErr_SetString(PyExc_ImportError, "_firstc: no thread attributes");
        return NULL;
    }
    return PyModule_Create(&module);
}
