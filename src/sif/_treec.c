/* A whole walk in C: the directories under roots, depth first, a chunk of files a call.
 *
 * sif.walk.Walker decides the walk in Python (sif.dirread reads a directory a call):
 * at 1 M files in 111k directories that cost ~12 us of Python a directory, beside the
 * system calls. Here the walk itself runs in C, the decisions of Walker._resolve made
 * the same way in the same order: depth first, subdirectories in readdir order; a
 * directory taken once, by (device, inode), under the first name met; one that is an
 * ancestor of itself a loop (a warning); skip_dirs never entered; with one_fs, nothing
 * on another device than its root's. Each directory is read as sif._dirc reads one
 * (sif/_dirent.h). sif.treewalk serves it (the case of sif._dirc: links not followed,
 * no patterns) and holds it to the Python walk in the tests.
 *
 * Walker(skip_hidden, lo, hi, trust_type, one_fs, skip_keys, threads, secret)
 *   add_root(path: bytes, dev, ino) -> bool   False: that directory was walked already
 *   read(max_files, dir_base=0) -> chunk | None   None: nothing left under the roots
 *   visited() -> bytes                         (dev, ino) of every directory taken
 *   close()                                    helpers stopped and joined, memory freed
 *
 * A chunk: (dirs, dir_of, names, numbers, keys, problems, counts) for the directories
 * walked since the last call (ending after the one that reached max_files files):
 * dirs, the paths (str, each ending with "/") of those that hold files kept; dir_of, a
 * uint32 a file, dir_base plus its index in dirs; names, (bytes, offsets): the names' bytes one after
 * another and n + 1 int64 offsets (decoded when needed, as os.fsdecode does: the
 * caller's RecordColumns.add_raw_names); numbers, six int64 columns (dev, ino,
 * size, mtime_ns, nlink, ctime_ns); keys, two uint64 a file (with a secret, 1 to 64
 * bytes: the file's path key, BLAKE2b-128 of its path bytes keyed by the secret, as
 * sif.pathkeys.path_key; with b"", none: empty); problems, (kind, path, errno) in the walk's order (0 a name not UTF-8,
 * 1 an entry that could not be stat-ed, 2 a readdir that failed part-way, 3 a
 * directory that could not be opened, 4 a loop); counts, (directories read, bytes of
 * the files kept, filtered, symlinks, special).
 *
 * threads: helper threads that read directories the walk has taken but not reached yet
 * (among the WINDOW on top of its stack) while this one resolves: the records are the
 * same whatever the number. The GIL is released during read(); signals are looked at
 * every CHECK_DIRS directories, every CHECK_EVERY entries of a directory this thread
 * reads, and every WAIT_NS (50 ms) while it waits for a helper to finish a directory
 * (one of 500k entries took 2.3 s, cold): a signal handler's exception ends read()
 * (the chunk is dropped), and close()
 * stops the helpers, each after closing the directory it reads: no descriptor stays
 * open once close() returns.
 *
 * path_keys(paths, secret) -> bytes: the keys of many paths (a sequence of bytes), two
 * uint64 a path, as the walk computes them (sif.pathkeys.path_keys: a migration's and a
 * commit's keys), without the GIL.
 *
 * Its types are in _treec.h; the reading of a directory and the helper threads in
 * _treeread.h; BLAKE2b in _blake2b.h; here, the walk's decisions (resolve) and the
 * Python type.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>

#include "_dirent.h"
#include "_treec.h"
#include "_treeread.h"
#include "_hiddenlist.h"

/* prefix + name in w->scratch; its length, or -1 out of memory. */
static long long join(Walker *w, const node *nd, const char *name, size_t nlen) {
    size_t plen = nd->len + !ends_with_slash(nd);
    if (RESERVE(w->scratch, w->scratch_cap, plen + nlen + 1) != 0)
        return -1;
    memcpy(w->scratch, nd->path, nd->len);
    w->scratch[plen - 1] = '/';
    memcpy(w->scratch + plen, name, nlen);
    return (long long)(plen + nlen);
}

static int add_problem(chunk *c, int kind, const char *path, size_t len, int err) {
    if (RESERVE(c->poff, c->pcap, c->np + 2) != 0 || RESERVE(c->pkind, c->pkcap, c->np + 1) != 0 ||
        RESERVE(c->perr, c->pecap, c->np + 1) != 0 ||
        RESERVE(c->pbuf, c->proom, c->pused + len) != 0)
        return -1;
    c->poff[c->np] = c->pused;
    memcpy(c->pbuf + c->pused, path, len);
    c->pused += len;
    c->poff[c->np + 1] = c->pused;
    c->pkind[c->np] = kind;
    c->perr[c->np] = err;
    c->np++;
    return 0;
}

static int add_named_problem(Walker *w, const node *nd, int kind, const entry *e, int err) {
    long long len = join(w, nd, nd->l.names + e->name_off, e->name_len);
    return len < 0 ? -1 : add_problem(&w->c, kind, w->scratch, (size_t)len, err);
}

/* A node the walk does not take (under mu): freed, or left to the helper reading it. */
static void drop(Walker *w, node *k) {
    if (!k)
        return;
    if (k->state == READING) {
        k->orphan = 1;
        return;
    }
    if (k->state == READ)
        w->ahead -= k->l.n;
    node_free(k);
}

/* The subdirectories a helper made for nd that the walk did not take, dropped (under mu):
 * nd's resolve failed, and node_free(nd) must not free one a helper reads. */
static void drop_pre(Walker *w, node *nd) {
    for (size_t i = 0; nd->pre && i < nd->l.n; i++) {
        drop(w, nd->pre[i]);
        nd->pre[i] = NULL;
    }
}

static int is_hook(const node *nd) {
    return hook_len && nd->len == hook_len && memcmp(nd->path, hook_path, hook_len) == 0;
}

/* Tests only: wait (under mu, 10 s at most) until each subdirectory a helper made for nd,
 * the hook's node, is being read (held by its helper: see hook_path). */
static void hook_wait(Walker *w, node *nd) {
    for (int t = 0; t < 10000; t++) {
        int ready = nd->pre != NULL;
        for (size_t i = 0; ready && i < nd->l.n; i++)
            ready = !nd->pre[i] || nd->pre[i]->state == READING;
        if (ready)
            return;
        if (w->waiting)
            pthread_cond_broadcast(&w->work);
        pthread_mutex_unlock(&w->mu);
        usleep(1000);
        pthread_mutex_lock(&w->mu);
    }
}

/* The walk's decisions for one directory read (no lock held): its files into the chunk,
 * its subdirectories taken pushed on the stack (under the lock). 0, or -1 out of memory. */
static int resolve(Walker *w, node *nd) {
    chunk *c = &w->c;
    c->dirs_read++;
    if (nd->open_err)
        return add_problem(c, 3, nd->path, nd->len, nd->open_err);
    if (RESERVE(w->anc, w->anc_cap, 2 * (nd->depth + 1)) != 0)
        return -1;
    w->anc[2 * nd->depth] = nd->dev;
    w->anc[2 * nd->depth + 1] = nd->ino;
    size_t dir_no = (size_t)-1, f = 0;
    node **kids = NULL;
    size_t nk = 0, kcap = 0;
    int slash = ends_with_slash(nd);
    int fail_at = is_hook(nd) ? hook_fail : 0; /* tests only: 0 */
    for (size_t i = 0; i < nd->l.n; i++) {
        entry *e = &nd->l.items[i];
        if (e->bad_utf8 && add_named_problem(w, nd, 0, e, 0) != 0)
            goto oom_unlocked;
        if (e->kind == K_FILE) {
            if (fail_at == 1)
                goto oom_unlocked;
            if (dir_no == (size_t)-1) {
                size_t need = c->dused + nd->len + 1;
                if (RESERVE(c->dbuf, c->droom, need) != 0 ||
                    RESERVE(c->doff, c->dcap, c->nd + 2) != 0)
                    goto oom_unlocked;
                c->doff[c->nd] = c->dused;
                memcpy(c->dbuf + c->dused, nd->path, nd->len);
                c->dused += nd->len;
                if (!slash)
                    c->dbuf[c->dused++] = '/';
                c->doff[c->nd + 1] = c->dused;
                dir_no = c->nd++;
            }
            size_t k = c->nf;
            if (RESERVE(c->dir_of, c->dofcap, k + 1) != 0 || RESERVE(c->num, c->ocap, 6 * (k + 1)) != 0 ||
                (w->keys && RESERVE(c->keys, c->kcap, 2 * (k + 1)) != 0) ||
                RESERVE(c->noff, c->ncap, k + 2) != 0 ||
                RESERVE(c->nbuf, c->nroom, c->nused + e->name_len) != 0)
                goto oom_unlocked;
            c->dir_of[k] = (uint32_t)dir_no;
            c->noff[k] = c->nused;
            memcpy(c->nbuf + c->nused, nd->l.names + e->name_off, e->name_len);
            c->nused += e->name_len;
            c->noff[k + 1] = c->nused;
            int64_t *row = c->num + 6 * k;
            row[0] = e->dev;
            row[1] = e->ino;
            row[2] = e->size;
            row[3] = e->mtime_ns;
            row[4] = e->nlink;
            row[5] = e->ctime_ns;
            if (w->keys) {
                c->keys[2 * k] = nd->keys[2 * f];
                c->keys[2 * k + 1] = nd->keys[2 * f + 1];
            }
            f++;
            c->nf++;
            c->bytes += e->size;
        } else if (e->kind == K_FILTERED) {
            c->filtered++;
        } else if (e->kind == K_LINK) {
            c->links++;
        } else if (e->kind == K_SPECIAL) {
            c->special++;
        } else if (e->kind == K_STAT_ERROR) {
            if (add_named_problem(w, nd, 1, e, e->err) != 0)
                goto oom_unlocked;
        }
    }
    if (nd->dir_err && add_problem(c, 2, nd->path, nd->len, nd->dir_err) != 0)
        goto oom_unlocked;
    pthread_mutex_lock(&w->mu); /* the subdirectories a helper made or reads */
    for (size_t i = 0; i < nd->l.n; i++) {
        entry *e = &nd->l.items[i];
        if (e->kind != K_DIR)
            continue;
        node *pre = nd->pre ? nd->pre[i] : NULL;
        if (pre)
            nd->pre[i] = NULL;
        uint64_t dev = (uint64_t)e->dev, ino = (uint64_t)e->ino;
        int take = !keyset_has(&w->skip, dev, ino);
        if (take) {
            int loop = 0;
            for (size_t a = 0; a <= nd->depth && !loop; a++)
                loop = w->anc[2 * a] == dev && w->anc[2 * a + 1] == ino;
            if (loop && add_named_problem(w, nd, 4, e, 0) != 0) {
                drop(w, pre);
                goto oom;
            }
            take = !loop && !keyset_has(&w->visited, dev, ino) &&
                   !(w->one_fs && dev != nd->top_dev);
        }
        if (!take) {
            drop(w, pre);
            continue;
        }
        node *kid = pre;
        if (!kid) {
            long long len = join(w, nd, nd->l.names + e->name_off, e->name_len);
            kid = len < 0 ? NULL
                          : new_node(w->scratch, (size_t)len, NULL, 0, dev, ino, nd->top_dev,
                                     nd->depth + 1);
        }
        if (!kid || (fail_at >= 2 && nk + 2 == (size_t)fail_at) ||
            keyset_add(&w->visited, dev, ino) < 0 || RESERVE(kids, kcap, nk + 1) != 0) {
            drop(w, kid);
            goto oom;
        }
        kids[nk++] = kid;
    }
    if (RESERVE(w->stack, w->cap, w->n + nk) != 0)
        goto oom;
    for (size_t i = nk; i > 0; i--) /* reversed: the walk visits them in readdir order */
        w->stack[w->n++] = kids[i - 1];
    if (nk && w->waiting)
        pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->mu);
    free(kids);
    return 0;
oom: /* the lock held */
    for (size_t i = 0; i < nk; i++)
        drop(w, kids[i]);
    drop_pre(w, nd);
    pthread_mutex_unlock(&w->mu);
    free(kids);
    return -1;
oom_unlocked:
    pthread_mutex_lock(&w->mu);
    drop_pre(w, nd);
    pthread_mutex_unlock(&w->mu);
    free(kids);
    return -1;
}

static int check_signals(void *ctx) {
    PyThreadState **ts = (PyThreadState **)ctx;
    PyEval_RestoreThread(*ts);
    int interrupted = PyErr_CheckSignals();
    *ts = PyEval_SaveThread();
    return interrupted;
}

static PyObject *decode(const char *s, size_t len) {
    return PyUnicode_DecodeFSDefaultAndSize(s, (Py_ssize_t)len);
}


static PyObject *build(Walker *w) {
    chunk *c = &w->c;
    PyObject *dirs = new_list_hidden((Py_ssize_t)c->nd); /* both tracked once full */
    PyObject *names = PyBytes_FromStringAndSize(c->nbuf, (Py_ssize_t)c->nused);
    PyObject *offsets = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((c->nf + 1) * sizeof(int64_t)));
    PyObject *problems = new_list_hidden((Py_ssize_t)c->np);
    PyObject *dir_of = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(c->nf * sizeof(uint32_t)));
    PyObject *numbers = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(6 * c->nf * sizeof(int64_t)));
    PyObject *keys = PyBytes_FromStringAndSize(
        (const char *)c->keys, (Py_ssize_t)(w->keys ? 2 * c->nf * sizeof(uint64_t) : 0));
    PyObject *out = NULL;
    if (!dirs || !names || !offsets || !problems || !dir_of || !numbers || !keys)
        goto done;
    for (size_t i = 0; i < c->nd; i++) {
        PyObject *s = decode(c->dbuf + c->doff[i], c->doff[i + 1] - c->doff[i]);
        if (!s)
            goto done;
        PyList_SET_ITEM(dirs, (Py_ssize_t)i, s);
    }
    uint32_t *dof = (uint32_t *)PyBytes_AS_STRING(dir_of);
    for (size_t i = 0; i < c->nf; i++)
        dof[i] = c->dir_of[i] + c->dir_base;
    int64_t *off = (int64_t *)PyBytes_AS_STRING(offsets);
    off[0] = 0;
    for (size_t i = 0; i < c->nf; i++)
        off[i + 1] = (int64_t)c->noff[i + 1];
    int64_t *col = (int64_t *)PyBytes_AS_STRING(numbers);
    for (size_t i = 0; i < c->nf; i++)
        for (size_t j = 0; j < 6; j++)
            col[j * c->nf + i] = c->num[6 * i + j];
    for (size_t i = 0; i < c->np; i++) {
        PyObject *s = decode(c->pbuf + c->poff[i], c->poff[i + 1] - c->poff[i]);
        PyObject *t = s ? Py_BuildValue("(iOi)", c->pkind[i], s, c->perr[i]) : NULL;
        Py_XDECREF(s);
        if (!t)
            goto done;
        PyList_SET_ITEM(problems, (Py_ssize_t)i, t);
    }
    PyObject_GC_Track(dirs);
    PyObject_GC_Track(problems);
    /* The inner tuples first: Py_BuildValue would make them while the outer one is half
     * full. */
    PyObject *raw = Py_BuildValue("(OO)", names, offsets);
    PyObject *counts = raw == NULL ? NULL
                                   : Py_BuildValue("(LLLLL)", c->dirs_read, c->bytes, c->filtered,
                                                   c->links, c->special);
    if (counts != NULL)
        out = Py_BuildValue("(OONOOON)", dirs, dir_of, raw, numbers, keys, problems, counts);
    else
        Py_XDECREF(raw);
done:
    Py_XDECREF(dirs);
    Py_XDECREF(names);
    Py_XDECREF(offsets);
    Py_XDECREF(problems);
    Py_XDECREF(dir_of);
    Py_XDECREF(numbers);
    Py_XDECREF(keys);
    return out;
}

static PyObject *walker_read(Walker *w, PyObject *args) {
    Py_ssize_t max_files;
    unsigned int dir_base = 0;
    if (!PyArg_ParseTuple(args, "n|I", &max_files, &dir_base))
        return NULL;
    if (w->busy || !w->sync_ready) {
        PyErr_SetString(PyExc_RuntimeError, "the walker is busy or closed");
        return NULL;
    }
    if (w->n == 0)
        Py_RETURN_NONE;
    w->busy = 1;
    chunk_reset(&w->c);
    w->c.dir_base = dir_base;
    if (!w->started)
        start_helpers(w);
    int failed = 0; /* -1 out of memory, -2 a signal handler raised */
    size_t since = 0;
    PyThreadState *ts = PyEval_SaveThread();
    pthread_mutex_lock(&w->mu);
    while (!failed && w->n > 0 && w->c.nf < (size_t)max_files) {
        node *nd = w->stack[w->n - 1], *other = NULL;
        if (nd->state == READ && is_hook(nd))
            hook_wait(w, nd); /* tests only */
        if (nd->state == READ) { /* its turn: resolved, then freed */
            w->n--;
            size_t before = w->ahead;
            w->ahead -= nd->l.n;
            if (w->waiting && before >= AHEAD_MAX && w->ahead < AHEAD_MAX)
                pthread_cond_broadcast(&w->work); /* room to read ahead again */
            pthread_mutex_unlock(&w->mu);
            failed = nd->failed ? nd->failed : resolve(w, nd);
            node_free(nd);
            if (!failed && ++since >= CHECK_DIRS) {
                since = 0;
                failed = check_signals(&ts) ? -2 : 0;
            }
            pthread_mutex_lock(&w->mu);
            continue;
        }
        if (nd->state == UNREAD) {
            other = nd;
        } else { /* a helper reads it: read another meanwhile, or wait */
            size_t low = w->n > WINDOW ? w->n - WINDOW : 0;
            for (size_t i = w->n - 1; i > low && !other; i--)
                if (w->stack[i - 1]->state == UNREAD)
                    other = w->stack[i - 1];
            if (!other) { /* a signal is looked at every WAIT_NS meanwhile */
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_nsec += WAIT_NS;
                if (until.tv_nsec >= 1000000000L) {
                    until.tv_sec++;
                    until.tv_nsec -= 1000000000L;
                }
                w->resolver_waits = 1;
                int r = pthread_cond_timedwait(&w->done, &w->mu, &until);
                w->resolver_waits = 0;
                if (r == ETIMEDOUT) {
                    pthread_mutex_unlock(&w->mu);
                    failed = check_signals(&ts) ? -2 : 0;
                    pthread_mutex_lock(&w->mu);
                }
                continue;
            }
        }
        other->state = READING; /* on the stack, not popped while read */
        pthread_mutex_unlock(&w->mu);
        read_node(w, other, check_signals, &ts);
        pthread_mutex_lock(&w->mu);
        if (other->failed == -2) { /* interrupted: left to be read again */
            node_reset(other);
            failed = -2;
        } else {
            other->state = READ;
            w->ahead += other->l.n;
        }
    }
    pthread_mutex_unlock(&w->mu);
    PyEval_RestoreThread(ts);
    PyObject *out = NULL;
    if (failed == -1)
        PyErr_NoMemory();
    else if (failed == 0)
        out = build(w);
    /* failed == -2: the signal handler's exception is set */
    w->busy = 0;
    return out;
}

static PyObject *walker_add_root(Walker *w, PyObject *args) {
    const char *path;
    Py_ssize_t len;
    unsigned long long dev, ino;
    if (!PyArg_ParseTuple(args, "y#KK", &path, &len, &dev, &ino))
        return NULL;
    if (w->busy || !w->sync_ready) {
        PyErr_SetString(PyExc_RuntimeError, "the walker is busy or closed");
        return NULL;
    }
    int added = keyset_add(&w->visited, dev, ino);
    if (added < 0)
        return PyErr_NoMemory();
    if (!added)
        Py_RETURN_FALSE;
    node *nd = new_node(path, (size_t)len, NULL, 0, dev, ino, dev, 0);
    pthread_mutex_lock(&w->mu);
    int full = !nd || RESERVE(w->stack, w->cap, w->n + 1) != 0;
    if (!full) {
        w->stack[w->n++] = nd;
        if (w->waiting)
            pthread_cond_broadcast(&w->work);
    }
    pthread_mutex_unlock(&w->mu);
    if (full) {
        node_free(nd);
        return PyErr_NoMemory();
    }
    Py_RETURN_TRUE;
}

static PyObject *walker_visited(Walker *w, PyObject *Py_UNUSED(ignored)) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(2 * w->visited.n * sizeof(uint64_t)));
    if (!out)
        return NULL;
    uint64_t *k = (uint64_t *)PyBytes_AS_STRING(out);
    size_t j = 0;
    for (size_t i = 0; i < w->visited.cap; i++)
        if (w->visited.used[i]) {
            k[2 * j] = w->visited.slots[2 * i];
            k[2 * j + 1] = w->visited.slots[2 * i + 1];
            j++;
        }
    return out;
}

static void walker_clear(Walker *w) {
    if (w->sync_ready) {
        Py_BEGIN_ALLOW_THREADS;
        stop_helpers(w);
        Py_END_ALLOW_THREADS;
    }
    for (size_t i = 0; i < w->n; i++)
        node_free(w->stack[i]);
    free(w->stack);
    w->stack = NULL;
    w->n = w->cap = w->ahead = 0;
    free(w->anc);
    w->anc = NULL;
    w->anc_cap = 0;
    free(w->scratch);
    w->scratch = NULL;
    w->scratch_cap = 0;
    keyset_free(&w->skip);
    keyset_free(&w->visited);
    chunk_free(&w->c);
}

static PyObject *walker_close(Walker *w, PyObject *Py_UNUSED(ignored)) {
    if (w->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the walker is busy");
        return NULL;
    }
    walker_clear(w);
    if (w->sync_ready) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->work);
        pthread_cond_destroy(&w->done);
        w->sync_ready = 0;
    }
    Py_RETURN_NONE;
}

static int walker_init(Walker *w, PyObject *args, PyObject *kwds) {
    (void)kwds;
    int skip_hidden, trust_type, one_fs, threads;
    long long lo, hi;
    const char *skip, *secret;
    Py_ssize_t skip_len, secret_len;
    if (!PyArg_ParseTuple(args, "pLLppy#iy#", &skip_hidden, &lo, &hi, &trust_type, &one_fs, &skip,
                          &skip_len, &threads, &secret, &secret_len))
        return -1;
    if (secret_len > 64) {
        PyErr_SetString(PyExc_ValueError, "a secret has 64 bytes at most");
        return -1;
    }
    if (w->sync_ready) {
        PyErr_SetString(PyExc_RuntimeError, "the walker is already set up");
        return -1;
    }
    w->skip_hidden = skip_hidden;
    w->lo = lo;
    w->hi = hi;
    w->trust_type = trust_type;
    w->one_fs = one_fs;
    w->keys = secret_len > 0;
    if (w->keys)
        b2b_key(&w->key, (const unsigned char *)secret, (size_t)secret_len);
    w->threads_wanted = threads;
    uint64_t pair[2];
    for (Py_ssize_t i = 0; i + 16 <= skip_len; i += 16) {
        memcpy(pair, skip + i, 16);
        if (keyset_add(&w->skip, pair[0], pair[1]) < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->work, NULL);
    pthread_cond_init(&w->done, NULL);
    w->sync_ready = 1;
    return 0;
}

static void walker_dealloc(Walker *w) {
    walker_clear(w);
    if (w->sync_ready) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->work);
        pthread_cond_destroy(&w->done);
    }
    Py_TYPE(w)->tp_free((PyObject *)w);
}

/* _test_hooks(path: bytes, fail: int) -> int: sets the tests' hooks (see hook_path in
 * _treec.h; b"" clears them) and returns the nodes freed while a helper read them. */
static PyObject *test_hooks(PyObject *Py_UNUSED(m), PyObject *args) {
    const char *path;
    Py_ssize_t len;
    int fail;
    if (!PyArg_ParseTuple(args, "y#i", &path, &len, &fail))
        return NULL;
    if ((size_t)len >= sizeof(hook_path)) {
        PyErr_SetString(PyExc_ValueError, "path too long");
        return NULL;
    }
    memcpy(hook_path, path, (size_t)len);
    hook_len = (size_t)len;
    hook_fail = fail;
    return PyLong_FromLong(__atomic_load_n(&freed_reading, __ATOMIC_RELAXED));
}

static PyObject *path_keys(PyObject *Py_UNUSED(m), PyObject *args) {
    PyObject *paths;
    const char *secret;
    Py_ssize_t secret_len;
    if (!PyArg_ParseTuple(args, "Oy#", &paths, &secret, &secret_len))
        return NULL;
    if (secret_len < 1 || secret_len > 64) {
        PyErr_SetString(PyExc_ValueError, "a secret has 1 to 64 bytes");
        return NULL;
    }
    PyObject *held = PySequence_Tuple(paths); /* the bytes kept alive without the GIL */
    if (!held)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(held);
    const unsigned char **at = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*at));
    size_t *len = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(*len));
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(2 * (size_t)n * sizeof(uint64_t)));
    if (!at || !len || !out) {
        Py_CLEAR(out);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyTuple_GET_ITEM(held, i);
        if (!PyBytes_Check(p)) {
            PyErr_Format(PyExc_TypeError, "a path is bytes, not %.100s", Py_TYPE(p)->tp_name);
            Py_CLEAR(out);
            goto done;
        }
        at[i] = (const unsigned char *)PyBytes_AS_STRING(p);
        len[i] = (size_t)PyBytes_GET_SIZE(p);
    }
    uint64_t *keys = (uint64_t *)PyBytes_AS_STRING(out);
    b2b_keyed key;
    b2b_key(&key, (const unsigned char *)secret, (size_t)secret_len);
    Py_BEGIN_ALLOW_THREADS;
    for (Py_ssize_t i = 0; i < n; i++)
        b2b_hash16(&key, at[i], len[i], keys + 2 * i);
    Py_END_ALLOW_THREADS;
done:
    PyMem_Free(at);
    PyMem_Free(len);
    Py_DECREF(held);
    return out;
}

/* decode_names(blob, offsets) -> list of str: blob[offsets[i]:offsets[i + 1]] for each i,
 * decoded as os.fsdecode does (UTF-8, surrogateescape). The names the walk gives raw
 * (bytes and int64 offsets, above), decoded when a command needs them: ~45 ns a name
 * against ~80-100 ns for the slices and decodes of a generator in Python (/usr's 117 k
 * names: 8 ms against 20). Offsets that do not rise within the blob are a ValueError. */
static PyObject *decode_names(PyObject *Py_UNUSED(m), PyObject *args) {
    Py_buffer blob, off;
    PyObject *off_obj;
    if (!PyArg_ParseTuple(args, "y*O:decode_names", &blob, &off_obj))
        return NULL;
    if (PyObject_GetBuffer(off_obj, &off, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) != 0) {
        PyBuffer_Release(&blob);
        return NULL;
    }
    PyObject *out = NULL;
    const char *f = off.format ? off.format : "B";
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
    if (off.itemsize != (Py_ssize_t)sizeof(int64_t) ||
        (strcmp(f, "q") != 0 && strcmp(f, "l") != 0)) {
        PyErr_SetString(PyExc_TypeError, "decode_names(): offsets must be int64 (array 'q')");
        goto done;
    }
    Py_ssize_t n = off.len / (Py_ssize_t)sizeof(int64_t);
    if (n < 1) {
        PyErr_SetString(PyExc_ValueError, "decode_names(): offsets are n + 1 int64");
        goto done;
    }
    const char *base = blob.buf;
    int64_t prev = 0;
    out = PyList_New(n - 1);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++) {
        int64_t at;
        memcpy(&at, (const char *)off.buf + i * (Py_ssize_t)sizeof at, sizeof at);
        if (at < prev || at > (int64_t)blob.len) { /* prev: 0, then the offset before */
            Py_CLEAR(out); /* first: the error's allocation may run a collection */
            PyErr_SetString(PyExc_ValueError, "decode_names(): offsets out of order");
            break;
        }
        if (i > 0) {
            PyObject *name = PyUnicode_DecodeUTF8(base + prev, (Py_ssize_t)(at - prev),
                                                  "surrogateescape");
            if (name == NULL) {
                Py_CLEAR(out);
                break;
            }
            PyList_SET_ITEM(out, i - 1, name);
        }
        prev = at;
    }
done:
    PyBuffer_Release(&blob);
    PyBuffer_Release(&off);
    return out;
}

static PyMethodDef module_methods[] = {
    {"decode_names", decode_names, METH_VARARGS,
     "decode_names(blob, offsets) -> list of str (UTF-8, surrogateescape)."},
    {"path_keys", path_keys, METH_VARARGS,
     "path_keys(paths, secret) -> bytes: two uint64 a path (keyed BLAKE2b-128)."},
    {"_test_hooks", test_hooks, METH_VARARGS, "Tests only: see hook_path in _treec.h."},
    {NULL, NULL, 0, NULL}};

static PyMethodDef walker_methods[] = {
    {"add_root", (PyCFunction)walker_add_root, METH_VARARGS,
     "Take the directory root (path bytes, dev, ino) unless walked already."},
    {"read", (PyCFunction)walker_read, METH_VARARGS,
     "Walk on until max_files files are found: a chunk, or None when all is walked."},
    {"visited", (PyCFunction)walker_visited, METH_NOARGS,
     "The (dev, ino) of every directory taken, as uint64 pairs."},
    {"close", (PyCFunction)walker_close, METH_NOARGS, "Stop the helpers, free everything."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject WalkerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "sif._treec.Walker",
    .tp_basicsize = sizeof(Walker),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A walk of directory trees in C (see the module).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)walker_init,
    .tp_dealloc = (destructor)walker_dealloc,
    .tp_methods = walker_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_treec",
                                    "A walk of directory trees in C.", -1, module_methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__treec(void) {
    if (PyType_Ready(&WalkerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&WalkerType);
    if (PyModule_AddObject(m, "Walker", (PyObject *)&WalkerType) < 0) {
        Py_DECREF(&WalkerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
