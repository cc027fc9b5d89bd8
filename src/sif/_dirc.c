/* One directory of the walk, read in C: readdir and one fstatat a name, without the GIL.
 *
 * sif.dirread.DirReader reads each directory of every walk (dupes, index, similar,
 * compare). In Python, a directory entry cost about 9 us on a slow CPU beside its
 * fstatat (os.scandir's DirEntry, its stat_result, eight array appends and the
 * filters): on /usr (117k files, 15k directories) the walk took 1.25 s where
 * find(1), making the same system calls, takes 0.5 s. This does the same calls
 * in one C loop and hands back columns; every decision the Python reader makes,
 * the same way, in the same order, for the case it serves: symbolic links not
 * followed, no --include or --exclude (sif.dirread uses the Python reader
 * otherwise, and where this module was not built).
 *
 * read_dir(path, skip_hidden, lo, hi, trust_type=True)
 *   -> (names, numbers, subdirs, keys, problems, counts)
 *
 * path: the directory (str); opened O_RDONLY | O_DIRECTORY | O_NONBLOCK |
 * O_CLOEXEC, as opendir does; a failed open raises OSError (with the path), as
 * os.open does. Then each entry but "." and "..":
 * - a name starting with "." is left out when skip_hidden;
 * - a name whose bytes are not valid UTF-8 is a problem (0, name, 0), kept;
 * - a symbolic link (d_type, or lstat where the file system gives no type) is
 *   counted, never followed;
 * - otherwise fstatat(dirfd, name, AT_SYMLINK_NOFOLLOW); a failure is a problem
 *   (1, name, errno);
 * - a regular file of lo <= size <= hi is kept: its name in `names`, its
 *   (dev, ino, size, mtime_ns, nlink, ctime_ns) in `numbers`, column after
 *   column (six int64 columns of len(names) values, native order); one of
 *   another size is counted as filtered;
 * - a directory goes to `subdirs`, its (dev, ino) to `keys` (uint64 pairs);
 * - anything else (FIFO, socket, device, or a name that became a link since
 *   readdir) is counted as special; nothing is ever opened but the directory.
 * A readdir that fails part-way is the problem (2, "", errno) after what it
 * read. Names are decoded as os.fsdecode does (surrogate escapes). With trust_type
 * false, every entry is lstat-ed as if the file system gave no d_type (some do: the
 * tests take that path so).
 * counts: (bytes of the files kept, filtered, symlinks, special).
 *
 * The GIL is released while the directory is read; it is taken back every
 * CHECK_EVERY entries to look for signals, so Ctrl-C stops a directory of
 * millions of entries (KeyboardInterrupt, the directory closed). The reading itself
 * is in _dirent.h, which sif._treec (a whole walk a call) shares.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_dirent.h"
#include "_hiddenlist.h"

/* The check of read_entries while the GIL is released (ctx: where its state was saved):
 * a signal handler that raised stops the read, its exception set. */

static int check_signals(void *ctx) {
    PyThreadState **ts = (PyThreadState **)ctx;
    PyEval_RestoreThread(*ts);
    int interrupted = PyErr_CheckSignals();
    *ts = PyEval_SaveThread();
    return interrupted;
}

static PyObject *build(listing *l, int dir_err) {
    size_t n_files = 0, n_dirs = 0;
    long long n_bytes = 0, n_filtered = 0, n_links = 0, n_special = 0;
    for (size_t i = 0; i < l->n; i++) {
        entry *e = &l->items[i];
        if (e->kind == K_FILE) {
            n_files++;
            n_bytes += (long long)e->size;
        } else if (e->kind == K_DIR) {
            n_dirs++;
        } else if (e->kind == K_FILTERED) {
            n_filtered++;
        } else if (e->kind == K_LINK) {
            n_links++;
        } else if (e->kind == K_SPECIAL) {
            n_special++;
        }
    }
    PyObject *names = NULL, *numbers = NULL, *subdirs = NULL, *keys = NULL, *problems = NULL;
    PyObject *out = NULL;
    /* names and subdirs are filled slot by slot: out of the collector's sight until
     * full (an allocation below may run a collection, whose finalizers could meet an
     * empty slot through gc.get_objects()). */
    names = new_list_hidden((Py_ssize_t)n_files);
    subdirs = new_list_hidden((Py_ssize_t)n_dirs);
    problems = PyList_New(0);
    numbers = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(6 * n_files * sizeof(int64_t)));
    keys = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(2 * n_dirs * sizeof(uint64_t)));
    if (!names || !subdirs || !problems || !numbers || !keys)
        goto done;
    int64_t *col = (int64_t *)PyBytes_AS_STRING(numbers);
    uint64_t *key = (uint64_t *)PyBytes_AS_STRING(keys);
    size_t f = 0, s = 0;
    for (size_t i = 0; i < l->n; i++) {
        entry *e = &l->items[i];
        PyObject *name = PyUnicode_DecodeFSDefaultAndSize(l->names + e->name_off,
                                                          (Py_ssize_t)e->name_len);
        if (!name)
            goto done;
        if (e->bad_utf8) {
            PyObject *p = Py_BuildValue("(iOi)", 0, name, 0);
            if (!p || PyList_Append(problems, p) != 0) {
                Py_XDECREF(p);
                Py_DECREF(name);
                goto done;
            }
            Py_DECREF(p);
        }
        if (e->kind == K_FILE) {
            PyList_SET_ITEM(names, (Py_ssize_t)f, name); /* steals the reference */
            col[f] = e->dev;
            col[n_files + f] = e->ino;
            col[2 * n_files + f] = e->size;
            col[3 * n_files + f] = e->mtime_ns;
            col[4 * n_files + f] = e->nlink;
            col[5 * n_files + f] = e->ctime_ns;
            f++;
        } else if (e->kind == K_DIR) {
            PyList_SET_ITEM(subdirs, (Py_ssize_t)s, name);
            key[2 * s] = (uint64_t)e->dev;
            key[2 * s + 1] = (uint64_t)e->ino;
            s++;
        } else if (e->kind == K_STAT_ERROR) {
            PyObject *p = Py_BuildValue("(iOi)", 1, name, e->err);
            Py_DECREF(name);
            if (!p || PyList_Append(problems, p) != 0) {
                Py_XDECREF(p);
                goto done;
            }
            Py_DECREF(p);
        } else {
            Py_DECREF(name);
        }
    }
    if (dir_err) {
        PyObject *p = Py_BuildValue("(isi)", 2, "", dir_err);
        if (!p || PyList_Append(problems, p) != 0) {
            Py_XDECREF(p);
            goto done;
        }
        Py_DECREF(p);
    }
    PyObject_GC_Track(names); /* full now */
    PyObject_GC_Track(subdirs);
    /* The inner tuple first: Py_BuildValue would make it while the outer one is half full. */
    PyObject *counts = Py_BuildValue("(LLLL)", n_bytes, n_filtered, n_links, n_special);
    if (counts != NULL)
        out = Py_BuildValue("(OOOOON)", names, numbers, subdirs, keys, problems, counts);
done:
    Py_XDECREF(names);
    Py_XDECREF(numbers);
    Py_XDECREF(subdirs);
    Py_XDECREF(keys);
    Py_XDECREF(problems);
    return out;
}

static PyObject *read_dir(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *path_obj;
    int skip_hidden, trust_type = 1;
    long long lo, hi;
    if (!PyArg_ParseTuple(args, "O&pLL|p", PyUnicode_FSConverter, &path_obj, &skip_hidden, &lo,
                          &hi, &trust_type))
        return NULL;
    const char *path = PyBytes_AS_STRING(path_obj);
    DIR *dir;
    Py_BEGIN_ALLOW_THREADS;
    dir = open_dir(path);
    Py_END_ALLOW_THREADS;
    if (!dir) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path_obj);
        Py_DECREF(path_obj);
        return NULL;
    }
    listing l = {0};
    int dir_err = 0;
    PyThreadState *ts = PyEval_SaveThread();
    int r = read_entries(dir, skip_hidden, lo, hi, trust_type, &l, &dir_err, check_signals, &ts);
    closedir(dir);
    PyEval_RestoreThread(ts);
    PyObject *out = NULL;
    if (r == -1)
        PyErr_NoMemory();
    else if (r == 0)
        out = build(&l, dir_err);
    /* r == -2: the signal handler's exception is set */
    listing_free(&l);
    Py_DECREF(path_obj);
    return out;
}

static PyMethodDef methods[] = {
    {"read_dir", read_dir, METH_VARARGS,
     "Read one directory: its kept files as columns, subdirectories, problems (see the "
     "module)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_dirc", "One directory of the walk, read in C.", -1, methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__dirc(void) { return PyModule_Create(&module); }
