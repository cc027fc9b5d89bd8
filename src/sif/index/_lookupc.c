/* The search of a segment lookup (sif.index.segments._descend) in C.
 *
 * For each target i, the first position in the sorted run keys[lo[i]:hi[i]] whose
 * key is not below target[i] (right: above it): bisect_left (bisect_right) of
 * each target in its run, as the numpy descent gives (tests compare them). numpy's
 * descent costs ~2.8 ms for the ~26,000 distinct windows of a 30 KB query, in every
 * segment of the index (a dozen whole-array passes); this is one pass. Pure:
 * buffers in, a buffer out, no I/O; the GIL is released while it runs. Built as an
 * optional extension (setup.py): without a compiler, sif uses the numpy descent.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Keys are fingerprints (hash values, uniform): the first probe is where the target's
 * value falls in proportion to its run (within a bucket, a 16-bit remainder), then a
 * gallop and a bisection bracket the answer near it. Any first probe gives the same
 * answer; a good one touches a cache line or two instead of a dozen spread over the
 * run. Positions "before" the answer hold keys below the target (right: not above). */
#define BOUNDS(T, BITS)                                                                    \
    static void bounds_##T(const T *keys, const T *target, const int64_t *lo,              \
                           const int64_t *hi, int right, int64_t *out, Py_ssize_t n) {     \
        for (Py_ssize_t i = 0; i < n; i++) {                                               \
            int64_t a = lo[i], b = hi[i];                                                  \
            T t = target[i];                                                               \
            if (a < b) {                                                                   \
                int64_t g = a + (int64_t)(((uint64_t)t * (uint64_t)(b - a)) >> (BITS));    \
                int64_t step = 1;                                                          \
                if (right ? keys[g] <= t : keys[g] < t) {                                  \
                    a = g + 1; /* the answer is in [a, b]: gallop right */                 \
                    while (a + step - 1 < b &&                                             \
                           (right ? keys[a + step - 1] <= t : keys[a + step - 1] < t)) {   \
                        a += step;                                                         \
                        step <<= 1;                                                        \
                    }                                                                      \
                    if (a + step - 1 < b) b = a + step - 1;                                \
                } else {                                                                   \
                    b = g; /* the answer is in [a, b]: gallop left */                      \
                    while (b - step >= a &&                                                \
                           !(right ? keys[b - step] <= t : keys[b - step] < t)) {          \
                        b -= step;                                                         \
                        step <<= 1;                                                        \
                    }                                                                      \
                    if (b - step + 1 > a) a = b - step + 1;                                \
                }                                                                          \
                while (a < b) { /* bisect [a, b) */                                        \
                    int64_t m = a + (b - a) / 2;                                           \
                    if (right ? keys[m] <= t : keys[m] < t)                                \
                        a = m + 1;                                                         \
                    else                                                                   \
                        b = m;                                                             \
                }                                                                          \
            }                                                                              \
            out[i] = a;                                                                    \
        }                                                                                  \
    }

BOUNDS(uint16_t, 16)
BOUNDS(uint32_t, 32)

PyDoc_STRVAR(bounds_doc,
             "bounds(keys, target, itemsize, lo, hi, right, out)\n\n"
             "out[i] = bisect_left(keys, target[i], lo[i], hi[i]) (bisect_right when right). "
             "keys and target: contiguous arrays of unsigned integers of itemsize bytes (2 or "
             "4); lo, hi, out: int64. ValueError unless 0 <= lo[i] <= hi[i] <= len(keys).");

static PyObject *py_bounds(PyObject *self, PyObject *args) {
    PyObject *o[5];
    int itemsize, right;
    if (!PyArg_ParseTuple(args, "OOiOOpO", &o[0], &o[1], &itemsize, &o[2], &o[3], &right, &o[4]))
        return NULL;
    if (itemsize != 2 && itemsize != 4) {
        PyErr_SetString(PyExc_ValueError, "bounds: itemsize must be 2 or 4");
        return NULL;
    }
    static const char *names[5] = {"keys", "target", "lo", "hi", "out"};
    Py_ssize_t sizes[5] = {itemsize, itemsize, 8, 8, 8};
    Py_buffer b[5];
    int got = 0;
    PyObject *result = NULL;
    for (; got < 5; got++) {
        if (PyObject_GetBuffer(o[got], &b[got], got == 4 ? PyBUF_WRITABLE : PyBUF_SIMPLE) < 0)
            goto done;
        if (b[got].len % sizes[got]) {
            PyErr_Format(PyExc_ValueError, "bounds: %s is not an array of %zd-byte items",
                         names[got], sizes[got]);
            got++;
            goto done;
        }
    }
    Py_ssize_t rows = b[0].len / itemsize, n = b[1].len / itemsize;
    const int64_t *lo = b[2].buf, *hi = b[3].buf;
    if (b[2].len / 8 != n || b[3].len / 8 != n || b[4].len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "bounds: arrays of mismatched lengths");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (lo[i] < 0 || lo[i] > hi[i] || hi[i] > rows) {
            PyErr_Format(PyExc_ValueError, "bounds: run %zd [%lld, %lld) out of [0, %zd]", i,
                         (long long)lo[i], (long long)hi[i], rows);
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS;
    if (itemsize == 2)
        bounds_uint16_t(b[0].buf, b[1].buf, lo, hi, right, b[4].buf, n);
    else
        bounds_uint32_t(b[0].buf, b[1].buf, lo, hi, right, b[4].buf, n);
    Py_END_ALLOW_THREADS;
    Py_INCREF(Py_None);
    result = Py_None;
done:
    for (int k = 0; k < got; k++) PyBuffer_Release(&b[k]);
    return result;
}

static PyMethodDef methods[] = {
    {"bounds", py_bounds, METH_VARARGS, bounds_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_lookupc",
    "The search of a segment lookup, compiled (see sif.index.segments).", -1, methods,
};

PyMODINIT_FUNC PyInit__lookupc(void) { return PyModule_Create(&module); }
