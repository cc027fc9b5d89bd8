/* The winnowing kernel of sif.core.kernels (_winnow_kernel, _winnow_many) in C.
 *
 * Same algorithm, same results, bit for bit (tests/core/test_winnowc.py compares
 * them): a compiled kernel loads in microseconds, where numba's costs about 0.6 s
 * and ~100 MB in every process that fingerprints (import numba, its CPU target,
 * the cached kernel). Pure: buffers in, buffers out, no I/O; the GIL is released
 * while it runs. Built as an optional extension (setup.py): without a compiler,
 * sif uses numba as before.
 *
 * Where the CPU has AVX-512 (F and DQ), the fast path (the stretch between two
 * changes of the minimum, most of the bytes) hashes eight windows at once and the
 * rescan finds its minimum eight lanes at a time; with AVX2 only the rescan is
 * vectorised. Chosen once, at import (__builtin_cpu_supports), so one build runs on
 * any x86-64; the same values either way. On 42 MB of Linux's fs/ (this machine, an
 * AMD EPYC with AVX-512): 111 ms plain, 89 ms with the rescan vectorised, 53 ms with
 * both.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* The rightmost minimum of a[0:n] (n >= 1): its index, and its value in *v. Ties go to
 * the right, as the scan `y <= mval` from the left gives them. */
static int64_t last_min_plain(const uint64_t *a, int64_t n, uint64_t *v) {
    uint64_t mv = NONE;
    int64_t mp = 0;
    for (int64_t r = 0; r < n; r++) {
        if (a[r] <= mv) {
            mp = r;
            mv = a[r];
        }
    }
    *v = mv;
    return mp;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X86 1
/* AVX-512 as the fast path uses it: the foundation and 64-bit multiplies (DQ). */
static int has_avx512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
}
/* The same with AVX-512: the minimum 8 lanes at a time, then its rightmost place found
 * from the right (a rescan reads the whole winnowing window: a fifth of the kernel's
 * time on text, before). */
__attribute__((target("avx512f"))) static int64_t last_min_avx512(const uint64_t *a, int64_t n,
                                                                   uint64_t *v) {
    __m512i mn = _mm512_set1_epi64(-1);
    int64_t r = 0;
    for (; r + 8 <= n; r += 8)
        mn = _mm512_min_epu64(mn, _mm512_loadu_si512((const void *)(a + r)));
    /* The lanes' minimum by shuffles (_mm512_reduce_min_epu64 needs GCC 7; a store and
     * a loop over the lanes cost a third of the kernel's time more, on this EPYC). */
    mn = _mm512_min_epu64(mn, _mm512_shuffle_i64x2(mn, mn, _MM_SHUFFLE(1, 0, 3, 2)));
    mn = _mm512_min_epu64(mn, _mm512_shuffle_i64x2(mn, mn, _MM_SHUFFLE(2, 3, 0, 1)));
    mn = _mm512_min_epu64(mn, _mm512_shuffle_epi32(mn, _MM_PERM_BADC));
    uint64_t m = (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(mn));
    for (; r < n; r++)
        if (a[r] < m) m = a[r];
    *v = m;
    __m512i want = _mm512_set1_epi64((long long)m);
    int64_t q = n;
    for (; q >= 8; q -= 8) {
        __mmask8 k = _mm512_cmpeq_epu64_mask(_mm512_loadu_si512((const void *)(a + q - 8)), want);
        if (k) return q - 8 + (31 - __builtin_clz((unsigned)k));
    }
    while (--q > 0 && a[q] != m) {
    }
    return q;
}

/* With AVX2 (no unsigned 64-bit compare: both sides' top bits flipped, then signed). */
__attribute__((target("avx2"))) static int64_t last_min_avx2(const uint64_t *a, int64_t n,
                                                              uint64_t *v) {
    const __m256i flip = _mm256_set1_epi64x((long long)0x8000000000000000ULL);
    __m256i mn = _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFLL); /* NONE, flipped */
    int64_t r = 0;
    for (; r + 4 <= n; r += 4) {
        __m256i y = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(a + r)), flip);
        mn = _mm256_blendv_epi8(mn, y, _mm256_cmpgt_epi64(mn, y));
    }
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, _mm256_xor_si256(mn, flip));
    uint64_t m = lanes[0];
    for (int k = 1; k < 4; k++)
        if (lanes[k] < m) m = lanes[k];
    for (; r < n; r++)
        if (a[r] < m) m = a[r];
    *v = m;
    __m256i want = _mm256_set1_epi64x((long long)m);
    int64_t q = n;
    for (; q >= 4; q -= 4) {
        __m256i eq = _mm256_cmpeq_epi64(_mm256_loadu_si256((const __m256i *)(a + q - 4)), want);
        int k = _mm256_movemask_pd(_mm256_castsi256_pd(eq));
        if (k) return q - 4 + (31 - __builtin_clz((unsigned)k));
    }
    while (--q > 0 && a[q] != m) {
    }
    return q;
}
#endif

typedef int64_t (*last_min_fn)(const uint64_t *, int64_t, uint64_t *);
static last_min_fn last_min = last_min_plain; /* the best this CPU runs (module init) */

/* The rightmost minimum of ring positions first..i (each at its index & mask): its
 * position, its value in *v. The window is one run of the ring or two (it wraps). */
static int64_t ring_last_min(const uint64_t *ring, uint64_t mask, int64_t first, int64_t i,
                             uint64_t *v) {
    int64_t size = (int64_t)mask + 1;
    int64_t start = (int64_t)((uint64_t)first & mask);
    int64_t n = i - first + 1;
    if (start + n <= size) return first + last_min(ring + start, n, v);
    int64_t head = size - start; /* positions first .. first+head-1, then the rest at 0 */
    uint64_t va, vb;
    int64_t pa = last_min(ring + start, head, &va);
    int64_t pb = last_min(ring, n - head, &vb);
    if (vb <= va) {
        *v = vb;
        return first + head + pb;
    }
    *v = va;
    return first + pa;
}

/* The rightmost non-degenerate minimum of windows i-ww+1 .. i (see kernels._rescan). */
static void rescan(const uint8_t *d, uint64_t *ring, uint64_t mask, int64_t i, int64_t window,
                   int64_t ww, int64_t lo, int64_t max_period, int64_t m, int64_t *mpos_out,
                   uint64_t *mval_out, int64_t *dead_until) {
    int64_t first = i - ww + 1;
    for (;;) {
        uint64_t mval;
        int64_t mpos = ring_last_min(ring, mask, first, i, &mval);
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

/* The constants of the fast path a block at a time: base^1..8 (pows), base^2, base^4,
 * base^8 and base^window (what a byte leaving the window takes away). */
typedef struct {
    uint64_t base, b2, b4, b8, bw, pows[8];
} fast_consts;

/* The fast path (no window's value at or under mval, the minimum still in the window)
 * over positions i.. while 8 fit before stop; *hp is the hash of window i-1. Returns
 * the position it reached: the first of a block whose value is <= mval (*found set,
 * *hp its hash, *xp its value; the ring written up to it), else the first of the
 * fewer than 8 left (*hp the hash before it). NULL where the CPU has no AVX-512. */
typedef int64_t (*fast_fn)(const uint8_t *d, int64_t i, int64_t stop, int64_t window,
                           uint64_t *hp, uint64_t mval, uint64_t *ring, uint64_t mask,
                           const fast_consts *c, uint64_t *xp, int *found);
static fast_fn fast_block = NULL;

#ifdef HAVE_X86
/* Eight windows at once, the same values bit for bit: the bytes' terms in_k (byte in,
 * byte out times base^window), their weighted prefix sums s_k = sum in_j base^(k-j) in
 * three shifted steps, hash k = h base^(k+1) + s_k, then fmix lane by lane. The hash
 * carried to the next block is h base^8 + s_7: one multiply on the chain, where the
 * window-by-window form waits on a multiply and fmix's two every byte. */
__attribute__((target("avx512f,avx512dq"))) static int64_t fast_avx512(
    const uint8_t *d, int64_t i, int64_t stop, int64_t window, uint64_t *hp, uint64_t mval,
    uint64_t *ring, uint64_t mask, const fast_consts *c, uint64_t *xp, int *found) {
    const __m512i zero = _mm512_setzero_si512();
    const __m512i vb = _mm512_set1_epi64((long long)c->base);
    const __m512i vb2 = _mm512_set1_epi64((long long)c->b2);
    const __m512i vb4 = _mm512_set1_epi64((long long)c->b4);
    const __m512i vbw = _mm512_set1_epi64((long long)c->bw);
    const __m512i pows = _mm512_loadu_si512((const void *)c->pows);
    const __m512i c1 = _mm512_set1_epi64((long long)FMIX_C1);
    const __m512i c2 = _mm512_set1_epi64((long long)FMIX_C2);
    const __m512i none = _mm512_set1_epi64(-1);
    const __m512i one = _mm512_set1_epi64(1);
    const __m512i vmval = _mm512_set1_epi64((long long)mval);
    const uint64_t size = mask + 1;
    uint64_t h = *hp;
    *found = 0;
    while (i + 8 <= stop) {
        uint64_t in8, out8;
        memcpy(&in8, d + i + window - 1, 8);
        memcpy(&out8, d + i - 1, 8);
        __m512i vin = _mm512_cvtepu8_epi64(_mm_cvtsi64_si128((long long)in8));
        __m512i vout = _mm512_cvtepu8_epi64(_mm_cvtsi64_si128((long long)out8));
        __m512i sv = _mm512_sub_epi64(vin, _mm512_mullo_epi64(vout, vbw));
        sv = _mm512_add_epi64(sv, _mm512_mullo_epi64(_mm512_alignr_epi64(sv, zero, 7), vb));
        sv = _mm512_add_epi64(sv, _mm512_mullo_epi64(_mm512_alignr_epi64(sv, zero, 6), vb2));
        sv = _mm512_add_epi64(sv, _mm512_mullo_epi64(_mm512_alignr_epi64(sv, zero, 4), vb4));
        __m512i hv = _mm512_set1_epi64((long long)h);
        hv = _mm512_add_epi64(_mm512_mullo_epi64(hv, pows), sv);
        __m512i x = _mm512_xor_si512(hv, _mm512_srli_epi64(hv, 33));
        x = _mm512_mullo_epi64(x, c1);
        x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 33));
        x = _mm512_mullo_epi64(x, c2);
        x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 33));
        x = _mm512_mask_sub_epi64(x, _mm512_cmpeq_epu64_mask(x, none), x, one);
        __mmask8 le = _mm512_cmple_epu64_mask(x, vmval);
        /* Only the windows up to the first such one go into the ring: a slot past it may
         * hold a window still inside the winnowing window. */
        __mmask8 keep = le ? (__mmask8)((2u << __builtin_ctz((unsigned)le)) - 1) : (__mmask8)0xFF;
        uint64_t slot = (uint64_t)i & mask;
        if (slot + 8 <= size) {
            _mm512_mask_storeu_epi64((void *)(ring + slot), keep, x);
        } else {
            uint64_t xs[8];
            _mm512_storeu_si512((void *)xs, x);
            for (int k = 0; k < 8; k++)
                if ((keep >> k) & 1) ring[(uint64_t)(i + k) & mask] = xs[k];
        }
        if (le) {
            int j = __builtin_ctz((unsigned)le);
            uint64_t hs[8], xs[8];
            _mm512_storeu_si512((void *)hs, hv);
            _mm512_storeu_si512((void *)xs, x);
            *hp = hs[j];
            *xp = xs[j];
            *found = 1;
            return i + j;
        }
        h = h * c->b8 + (uint64_t)_mm_extract_epi64(_mm512_extracti64x2_epi64(sv, 3), 1);
        i += 8;
    }
    *hp = h;
    return i;
}
#endif

/* kernels._winnow_kernel over d[0:len] (at least `window` bytes, 1 <= ww <= windows). */
static int64_t winnow_one(const uint8_t *d, int64_t len, int64_t window, int64_t ww,
                          int64_t max_period, uint64_t base, const uint64_t *outgoing,
                          const fast_consts *fc, uint64_t *ring, int64_t *out,
                          uint64_t *out_values, int64_t cap) {
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
            if (fast_block != NULL && i + 8 <= stop) {
                int found;
                i = fast_block(d, i, stop, window, &h, mval, ring, mask, fc, &x, &found);
                have_x = found;
            }
            while (!have_x && i < stop) {
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
    fast_consts fc;
    fc.base = (uint64_t)base;
    fc.bw = pw;
    fc.pows[0] = (uint64_t)base;
    for (int k = 1; k < 8; k++) fc.pows[k] = fc.pows[k - 1] * (uint64_t)base;
    fc.b2 = fc.pows[1];
    fc.b4 = fc.pows[3];
    fc.b8 = fc.pows[7];
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t lo = room[i];
        counts[i] = winnow_one(data + starts[i], ends[i] - starts[i], window, wws[i], max_period,
                               (uint64_t)base, outgoing, &fc, ring, out + lo, out_values + lo,
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

/* The kernel's forms this CPU runs, the best first (for the tests: each must agree):
 * avx512 (the fast path 8 windows at a time, the rescan 8 lanes), avx2 (the rescan 4
 * lanes), plain. */
static PyObject *py_variants(PyObject *self, PyObject *args) {
#ifdef HAVE_X86
    if (has_avx512()) return Py_BuildValue("(sss)", "avx512", "avx2", "plain");
    if (__builtin_cpu_supports("avx2")) return Py_BuildValue("(ss)", "avx2", "plain");
#endif
    return Py_BuildValue("(s)", "plain");
}

static PyObject *py_use(PyObject *self, PyObject *args) {
    const char *name;
    if (!PyArg_ParseTuple(args, "s", &name)) return NULL;
    last_min_fn chosen = NULL;
    fast_fn fast = NULL;
    if (strcmp(name, "plain") == 0) chosen = last_min_plain;
#ifdef HAVE_X86
    if (strcmp(name, "avx2") == 0 && __builtin_cpu_supports("avx2")) chosen = last_min_avx2;
    if (strcmp(name, "avx512") == 0 && has_avx512()) {
        chosen = last_min_avx512;
        fast = fast_avx512;
    }
#endif
    if (chosen == NULL) {
        PyErr_Format(PyExc_ValueError, "use: %s is not a form this CPU runs", name);
        return NULL;
    }
    last_min = chosen;
    fast_block = fast;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"winnow_many", py_winnow_many, METH_VARARGS, winnow_many_doc},
    {"variants", py_variants, METH_NOARGS, "The kernel's forms this CPU runs, the best first."},
    {"use", py_use, METH_VARARGS, "use(name): the kernel's form from now on (tests only)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_winnowc", "The winnowing kernel, compiled (see sif.core.winnowc).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__winnowc(void) {
#ifdef HAVE_X86
    __builtin_cpu_init();
    if (has_avx512()) {
        last_min = last_min_avx512;
        fast_block = fast_avx512;
    } else if (__builtin_cpu_supports("avx2")) {
        last_min = last_min_avx2;
    }
#endif
    return PyModule_Create(&module);
}
