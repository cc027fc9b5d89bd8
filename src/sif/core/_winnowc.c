/* The winnowing kernel of sif.core.kernels (_winnow_kernel, _winnow_many) in C.
 *
 * Same algorithm, same results, bit for bit (tests/core/test_winnowc.py compares
 * them): a compiled kernel loads in microseconds, where numba's costs about 0.6 s
 * and ~100 MB in every process that fingerprints (import numba, its CPU target,
 * the cached kernel). Pure: buffers in, buffers out, no I/O; the GIL is released
 * while it runs. Built as an optional extension (setup.py): without a compiler,
 * sif uses numba as before.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#define NONE UINT64_C(0xFFFFFFFFFFFFFFFF)
#define FMIX_C1 UINT64_C(0xFF51AFD7ED558CCD)
#define FMIX_C2 UINT64_C(0xC4CEB9FE1A85EC53)

static inline uint64_t fmix(uint64_t h) {
    uint64_t x = h ^ (h >> 33);
    x *= FMIX_C1;
    x ^= x >> 33;
    x *= FMIX_C2;
    x ^= x >> 33;
    return x - (uint64_t)(x == NONE);
}

/* The first tested period of window i, or 0; text fails on the first byte. */
static inline int64_t period(const uint8_t *d, int64_t i, int64_t window, int64_t lo, int64_t hi) {
    for (int64_t q = lo; q <= hi; q++) {
        int periodic = 1;
        for (int64_t r = i + q; r < i + window; r++) {
            if (d[r] != d[r - q]) {
                periodic = 0;
                break;
            }
        }
        if (periodic) return q;
    }
    return 0;
}

/* Window i is q-periodic; window e+1 is too iff one more byte repeats the one q before. */
static inline int64_t run_end(const uint8_t *d, int64_t i, int64_t window, int64_t q, int64_t m) {
    int64_t e = i;
    while (e + 1 < m && d[e + window] == d[e + window - q]) e++;
    return e;
}

/* The rightmost non-degenerate minimum of windows i-ww+1 .. i (see kernels._rescan). */
static void rescan(const uint8_t *d, uint64_t *ring, uint64_t mask, int64_t i, int64_t window,
                   int64_t ww, int64_t lo, int64_t max_period, int64_t m, int64_t *mpos_out,
                   uint64_t *mval_out, int64_t *dead_until) {
    int64_t first = i - ww + 1;
    for (;;) {
        uint64_t mval = NONE;
        int64_t mpos = first;
        for (int64_t r = first; r <= i; r++) {
            uint64_t y = ring[(uint64_t)r & mask];
            if (y <= mval) {
                mpos = r;
                mval = y;
            }
        }
        *mpos_out = mpos;
        *mval_out = mval;
        if (mval == NONE) return;
        int64_t q = period(d, mpos, window, lo, max_period);
        if (q == 0) return;
        int64_t e = run_end(d, mpos, window, q, m);
        int64_t b = mpos;
        while (b > first && d[b - 1] == d[b - 1 + q]) b--;
        int64_t top = e < i ? e : i;
        for (int64_t x = b; x <= top; x++) ring[(uint64_t)x & mask] = NONE;
        if (e > *dead_until) *dead_until = e;
    }
}

/* kernels._winnow_kernel over d[0:len] (at least `window` bytes, 1 <= ww <= windows). */
static int64_t winnow_one(const uint8_t *d, int64_t len, int64_t window, int64_t ww,
                          int64_t max_period, uint64_t base, const uint64_t *outgoing,
                          uint64_t *ring, int64_t *out, uint64_t *out_values, int64_t cap) {
    int64_t m = len - window + 1;
    int64_t lo = max_period / 2 + 1;
    uint64_t size = 1;
    while ((int64_t)size < ww) size *= 2;
    uint64_t mask = size - 1;
    uint64_t h = 0;
    for (int64_t j = 0; j < window; j++) h = h * base + (uint64_t)d[j];
    int64_t dead_until = -1, mpos = 0, last = -1, n = 0, i = 0;
    uint64_t mval = NONE, x = 0;
    int tested = 1;
    while (i < m) {
        int have_x = 0;
        if (i >= ww && i > dead_until) {
            int64_t stop = mpos + ww < m ? mpos + ww : m;
            while (i < stop) {
                h = h * base + ((uint64_t)d[i + window - 1] - outgoing[d[i - 1]]);
                x = fmix(h);
                ring[(uint64_t)i & mask] = x;
                if (x <= mval) {
                    have_x = 1;
                    break;
                }
                i++;
            }
            if (i >= m) break;
        }
        if (!have_x) {
            if (i) h = h * base + ((uint64_t)d[i + window - 1] - outgoing[d[i - 1]]);
            x = i <= dead_until ? NONE : fmix(h);
            ring[(uint64_t)i & mask] = x;
        }
        if (x <= mval) {
            mpos = i;
            mval = x;
            tested = x == NONE;
        } else if (mpos <= i - ww) {
            rescan(d, ring, mask, i, window, ww, lo, max_period, m, &mpos, &mval, &dead_until);
            tested = 1;
        }
        if (i >= ww - 1 && mpos != last) {
            if (!tested) {
                tested = 1;
                int64_t q = period(d, mpos, window, lo, max_period);
                if (q) {
                    ring[(uint64_t)mpos & mask] = NONE;
                    int64_t e = run_end(d, mpos, window, q, m);
                    if (e > dead_until) dead_until = e;
                    rescan(d, ring, mask, i, window, ww, lo, max_period, m, &mpos, &mval,
                           &dead_until);
                }
            }
            if (mpos != last) {
                last = mpos;
                if (mval != NONE) {
                    if (n < cap) {
                        out[n] = mpos;
                        out_values[n] = mval;
                    }
                    n++;
                }
            }
        }
        i++;
    }
    return n;
}

static int view(PyObject *obj, Py_buffer *buf, int writable, Py_ssize_t itemsize,
                const char *name) {
    if (PyObject_GetBuffer(obj, buf, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0) return -1;
    if (buf->len % itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: not an array of %zd-byte items", name, itemsize);
        PyBuffer_Release(buf);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(winnow_many_doc,
             "winnow_many(data, starts, ends, wws, window, max_period, base, top, room, out, "
             "out_values, counts)\n\n"
             "kernels._winnow_many: input i is data[starts[i]:ends[i]] with winnowing window "
             "wws[i]; it writes into out[room[i]:room[i+1]] and out_values alike, counts[i] "
             "its full count. Arrays of int64 (out_values, data: uint64, uint8).");

static PyObject *py_winnow_many(PyObject *self, PyObject *args) {
    PyObject *o[8], *base_obj, *top_obj;
    long long window, max_period;
    if (!PyArg_ParseTuple(args, "OOOOLLOOOOOO", &o[0], &o[1], &o[2], &o[3], &window, &max_period,
                          &base_obj, &top_obj, &o[4], &o[5], &o[6], &o[7]))
        return NULL;
    /* numpy's uint64 scalars (numba's kernel takes them) as well as ints: modulo 2^64. */
    unsigned long long base, top;
    PyObject *ix = PyNumber_Index(base_obj);
    if (ix == NULL) return NULL;
    base = PyLong_AsUnsignedLongLongMask(ix);
    Py_DECREF(ix);
    ix = PyNumber_Index(top_obj);
    if (ix == NULL) return NULL;
    top = PyLong_AsUnsignedLongLongMask(ix);
    Py_DECREF(ix);
    if (PyErr_Occurred()) return NULL;
    static const char *names[8] = {"data", "starts", "ends", "wws",
                                   "room", "out", "out_values", "counts"};
    static const Py_ssize_t sizes[8] = {1, 8, 8, 8, 8, 8, 8, 8};
    static const int writable[8] = {0, 0, 0, 0, 0, 1, 1, 1};
    Py_buffer b[8];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 8; got++)
        if (view(o[got], &b[got], writable[got], sizes[got], names[got]) < 0) goto done;
    const uint8_t *data = b[0].buf;
    const int64_t *starts = b[1].buf, *ends = b[2].buf, *wws = b[3].buf, *room = b[4].buf;
    int64_t *out = b[5].buf, *counts = b[7].buf;
    uint64_t *out_values = b[6].buf;
    Py_ssize_t n = b[1].len / 8;
    if (b[2].len / 8 != n || b[3].len / 8 != n || b[7].len / 8 != n || b[4].len / 8 != n + 1 ||
        window < 1 || max_period < 0) {
        PyErr_SetString(PyExc_ValueError, "winnow_many: arrays of mismatched lengths");
        goto done;
    }
    int64_t max_ww = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t len = ends[i] - starts[i];
        if (starts[i] < 0 || ends[i] > b[0].len || len < window || wws[i] < 1 ||
            wws[i] > len - window + 1 || room[i] < 0 || room[i] > room[i + 1] ||
            room[i + 1] > b[5].len / 8 || room[i + 1] > b[6].len / 8 ||
            2 * max_period > window) {
            PyErr_Format(PyExc_ValueError, "winnow_many: input %zd out of bounds", i);
            goto done;
        }
        if (wws[i] > max_ww) max_ww = wws[i];
    }
    uint64_t size = 1;
    while ((int64_t)size < max_ww) size *= 2;
    uint64_t *ring = malloc(size * sizeof(uint64_t));
    if (ring == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    uint64_t outgoing[256];
    uint64_t pw = (uint64_t)top * (uint64_t)base;
    for (int c = 0; c < 256; c++) outgoing[c] = (uint64_t)c * pw;
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t lo = room[i];
        counts[i] = winnow_one(data + starts[i], ends[i] - starts[i], window, wws[i], max_period,
                               (uint64_t)base, outgoing, ring, out + lo, out_values + lo,
                               room[i + 1] - lo);
    }
    Py_END_ALLOW_THREADS;
    free(ring);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"winnow_many", py_winnow_many, METH_VARARGS, winnow_many_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_winnowc", "The winnowing kernel, compiled (see sif.core.winnowc).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__winnowc(void) { return PyModule_Create(&module); }
