/* The match of a run's plan in C: each walked file's row of the index, and whether its
 * stat fields are those indexed (sif.index.runplan).
 *
 * In numpy (runplan._match_numpy, the reference this is tested against) the match is
 * two sorts of 64-bit keys, a search and half a dozen gathers of 8-byte columns in
 * random order: at 1 M files 0.4-0.5 s and ~60 MB of temporaries, the peak of an
 * incremental `sif index`. Here: one hash table of the index's keys (4 bytes a slot,
 * twice the rows), a probe a walked file, the stat fields compared as it goes.
 *
 * match(kkeys, kchecks, wkeys, kdev, kino, ksize, kmtime, kctime, wdev, wino, wsize,
 *       wmtime, wctime) -> (pos, same, rep) | None
 *
 * kkeys, kchecks: the two halves of the key of each row of the index (n uint64 each);
 * wkeys: those of each walked file, interleaved (2 m uint64); kdev ... kctime: the
 * rows' stat fields (n 8-byte values each; kctime None: not compared); wdev ... wctime:
 * the walked files' (m each). Any contiguous buffers. Returns, as bytes: pos, each
 * walked file's row (int64, -1: none), the lowest row of its origin; same (uint8), 1
 * where that row's dev, ino, size, mtime_ns (and ctime_ns) are the file's; rep (int64),
 * each row's lowest row of the same key. None when two keys share their first half with
 * different second halves (two paths, one half-key: the caller plans by the paths).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY UINT32_MAX
#define AHEAD 16 /* rows whose slot is prefetched ahead */

/* 0, or -1 where two rows or a walked file share a first half but not a second. */
static int do_match(const uint64_t *kkeys, const uint64_t *kchecks, size_t n,
                    const uint64_t *wkeys, size_t m, const int64_t *kst[5],
                    const int64_t *wst[5], int64_t *pos, uint8_t *same, int64_t *rep,
                    uint32_t *slots, size_t mask) {
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n) /* the slot a later row lands in: a miss paid ahead */
            __builtin_prefetch(&slots[(size_t)kkeys[i + AHEAD] & mask], 1);
        size_t h = (size_t)kkeys[i] & mask;
        for (;;) {
            uint32_t r = slots[h];
            if (r == EMPTY) {
                slots[h] = (uint32_t)i;
                rep[i] = (int64_t)i;
                break;
            }
            if (kkeys[r] == kkeys[i]) {
                if (kchecks[r] != kchecks[i])
                    return -1;
                rep[i] = (int64_t)r;
                break;
            }
            h = (h + 1) & mask;
        }
    }
    for (size_t j = 0; j < m; j++) {
        if (j + AHEAD < m)
            __builtin_prefetch(&slots[(size_t)wkeys[2 * (j + AHEAD)] & mask], 0);
        uint64_t key = wkeys[2 * j];
        size_t h = (size_t)key & mask;
        int64_t found = -1;
        for (;;) {
            uint32_t r = slots[h];
            if (r == EMPTY)
                break;
            if (kkeys[r] == key) {
                if (kchecks[r] != wkeys[2 * j + 1])
                    return -1;
                found = (int64_t)r;
                break;
            }
            h = (h + 1) & mask;
        }
        pos[j] = found;
        uint8_t s = found >= 0;
        for (int f = 0; f < 5 && s; f++)
            if (kst[f] != NULL)
                s = kst[f][found] == wst[f][j];
        same[j] = s;
    }
    return 0;
}

static PyObject *match(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer b[13];
    PyObject *kctime_obj;
    memset(b, 0, sizeof(b));
    PyObject *out = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*Oy*y*y*y*y*", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &kctime_obj, &b[8], &b[9], &b[10], &b[11], &b[12]))
        return NULL;
    int have_ctime = kctime_obj != Py_None;
    if (have_ctime && PyObject_GetBuffer(kctime_obj, &b[7], PyBUF_SIMPLE) != 0)
        goto done;
    size_t n = (size_t)b[0].len / 8, m = (size_t)b[2].len / 16;
    int ok = (size_t)b[1].len == 8 * n && n < EMPTY;
    for (int f = 3; f < 8; f++)
        if (f != 7 || have_ctime)
            ok = ok && (size_t)b[f].len == 8 * n;
    for (int f = 8; f < 13; f++)
        ok = ok && (size_t)b[f].len == 8 * m;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "columns of unequal lengths");
        goto done;
    }
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    uint32_t *slots = malloc(cap * sizeof(uint32_t));
    PyObject *pos = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * m));
    PyObject *same = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)m);
    PyObject *rep = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(8 * n));
    if (!slots || !pos || !same || !rep) {
        if (!slots)
            PyErr_NoMemory();
        free(slots);
        Py_XDECREF(pos);
        Py_XDECREF(same);
        Py_XDECREF(rep);
        goto done;
    }
    memset(slots, 0xFF, cap * sizeof(uint32_t));
    const int64_t *kst[5], *wst[5];
    for (int f = 0; f < 5; f++) {
        kst[f] = (f == 4 && !have_ctime) ? NULL : (const int64_t *)b[3 + f].buf;
        wst[f] = (const int64_t *)b[8 + f].buf;
    }
    int r;
    Py_BEGIN_ALLOW_THREADS;
    r = do_match((const uint64_t *)b[0].buf, (const uint64_t *)b[1].buf, n,
                 (const uint64_t *)b[2].buf, m, kst, wst, (int64_t *)PyBytes_AS_STRING(pos),
                 (uint8_t *)PyBytes_AS_STRING(same), (int64_t *)PyBytes_AS_STRING(rep), slots,
                 cap - 1);
    Py_END_ALLOW_THREADS;
    free(slots);
    if (r != 0) {
        Py_DECREF(pos);
        Py_DECREF(same);
        Py_DECREF(rep);
        out = Py_NewRef(Py_None);
    } else {
        out = Py_BuildValue("(NNN)", pos, same, rep);
    }
done:
    for (int f = 0; f < 13; f++)
        if (b[f].obj)
            PyBuffer_Release(&b[f]);
    return out;
}

static PyMethodDef methods[] = {
    {"match", match, METH_VARARGS,
     "Each walked file's row of the index and whether its stat fields are the same (see "
     "the module)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_planc", "The match of a run's plan, in C.", -1, methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__planc(void) { return PyModule_Create(&module); }
