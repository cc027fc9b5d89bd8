/* The types of sif._treec (included by _treec.c alone): a directory of the walk (node),
 * a set of (dev, ino) pairs, growable arrays, what a call of read() gathers (chunk), and
 * the walker itself. See _treec.c. */
#ifndef SIF_TREEC_H
#define SIF_TREEC_H

#define PY_SSIZE_T_CLEAN
#include <Python.h> /* first, as Python asks: the walker is a Python object */

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "_blake2b.h"
#include "_dirent.h"

#define WINDOW 1024
#define AHEAD_MAX (1 << 17)
#define CHECK_DIRS 256

#define WAIT_NS 50000000L /* the walk, waiting for a helper, looks at signals this often */

enum { UNREAD = 0, READING, READ };

/* Tests only (sif._treec._test_hooks), inert unless set: a helper holds each node it
 * picks under hook_path (READING, never read) until the walker stops; the walk, before
 * it resolves the node hook_path, waits (10 s at most) until each of its subdirectories
 * read ahead is being read, then fails that resolve as out of memory where hook_fail
 * says (1: at its first file; k >= 2: at its (k - 1)th subdirectory taken). freed_reading
 * counts the nodes freed while a helper read them: always 0, unless there is a bug. */
static char hook_path[4096];
static size_t hook_len;
static int hook_fail;
static long freed_reading;

typedef struct node_s {
    char *path; /* NUL-terminated bytes */
    size_t len;
    uint64_t dev, ino, top_dev;
    size_t depth;
    int state, open_err, dir_err, failed; /* failed: out of memory, or stopped */
    listing l;
    uint64_t *keys; /* two a K_FILE entry, in entry order (with a key) */
    /* Read ahead by a helper while this one waits, read, on the stack: its
     * subdirectories, one a K_DIR entry (at that entry's index; NULL elsewhere), which
     * the walk takes (or drops) when it resolves this one. */
    struct node_s **pre;
    size_t pre_next; /* entries before it were looked at by a helper */
    int pre_made, orphan; /* orphan: dropped while a helper read it, which frees it */
} node;

typedef struct {
    uint64_t *slots; /* dev, ino pairs */
    unsigned char *used;
    size_t cap, n;
} keyset;

static size_t key_hash(uint64_t dev, uint64_t ino) {
    uint64_t h = (ino ^ ((dev << 29) | (dev >> 35))) * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h ^ (h >> 31));
}

static int keyset_has(const keyset *s, uint64_t dev, uint64_t ino) {
    if (!s->cap)
        return 0;
    size_t i = key_hash(dev, ino) & (s->cap - 1);
    while (s->used[i]) {
        if (s->slots[2 * i] == dev && s->slots[2 * i + 1] == ino)
            return 1;
        i = (i + 1) & (s->cap - 1);
    }
    return 0;
}

static int keyset_add(keyset *s, uint64_t dev, uint64_t ino);

static int keyset_grow(keyset *s) {
    keyset t = {0};
    t.cap = s->cap ? 2 * s->cap : 1024;
    t.slots = malloc(2 * t.cap * sizeof(uint64_t));
    t.used = calloc(t.cap, 1);
    if (!t.slots || !t.used) {
        free(t.slots);
        free(t.used);
        return -1;
    }
    for (size_t i = 0; i < s->cap; i++)
        if (s->used[i])
            keyset_add(&t, s->slots[2 * i], s->slots[2 * i + 1]);
    free(s->slots);
    free(s->used);
    *s = t;
    return 0;
}

/* 1 added, 0 there already, -1 out of memory. */
static int keyset_add(keyset *s, uint64_t dev, uint64_t ino) {
    if (2 * (s->n + 1) > s->cap && keyset_grow(s) != 0)
        return -1;
    size_t i = key_hash(dev, ino) & (s->cap - 1);
    while (s->used[i]) {
        if (s->slots[2 * i] == dev && s->slots[2 * i + 1] == ino)
            return 0;
        i = (i + 1) & (s->cap - 1);
    }
    s->used[i] = 1;
    s->slots[2 * i] = dev;
    s->slots[2 * i + 1] = ino;
    s->n++;
    return 1;
}

static void keyset_free(keyset *s) {
    free(s->slots);
    free(s->used);
    memset(s, 0, sizeof(*s));
}

/* Room for `need` items of `size` bytes in the array *p of *cap items; -1 out of memory. */
static int reserve(void **p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap)
        return 0;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need)
        cap2 *= 2;
    void *q = realloc(*p, cap2 * size);
    if (!q)
        return -1;
    *p = q;
    *cap = cap2;
    return 0;
}

#define RESERVE(arr, cap, need) reserve((void **)&(arr), &(cap), (need), sizeof(*(arr)))

typedef struct { /* what read() hands back, gathered without the GIL */
    char *dbuf;  /* directory paths that hold files, each ending with '/' */
    size_t *doff; /* nd + 1 offsets */
    size_t dused, droom, nd, dcap;
    char *nbuf; /* file names */
    size_t *noff;
    size_t nused, nroom;
    uint32_t *dir_of;
    int64_t *num; /* six a file */
    uint64_t *keys;
    size_t nf, ocap, ncap, kcap, dofcap;
    char *pbuf; /* problem paths */
    size_t *poff;
    int *pkind, *perr;
    size_t pused, proom, np, pcap, pkcap, pecap;
    long long dirs_read, bytes, filtered, links, special;
    uint32_t dir_base; /* added to each file's dir_of */
} chunk;

static void chunk_free(chunk *c) {
    free(c->dbuf);
    free(c->doff);
    free(c->nbuf);
    free(c->noff);
    free(c->dir_of);
    free(c->num);
    free(c->keys);
    free(c->pbuf);
    free(c->poff);
    free(c->pkind);
    free(c->perr);
    memset(c, 0, sizeof(*c));
}

static void chunk_reset(chunk *c) {
    c->dused = c->nd = c->nused = c->nf = c->pused = c->np = 0;
    c->dirs_read = c->bytes = c->filtered = c->links = c->special = 0;
}

typedef struct {
    PyObject_HEAD int skip_hidden, trust_type, one_fs, keys;
    b2b_keyed key; /* the path keys' secret, made ready (with keys) */
    long long lo, hi;
    keyset skip, visited;
    node **stack;
    size_t n, cap;
    uint64_t *anc; /* the (dev, ino) of the directory being resolved and its ancestors */
    size_t anc_cap;
    char *scratch; /* a path being made */
    size_t scratch_cap;
    int threads_wanted, n_threads, started, stop, busy, sync_ready;
    size_t ahead; /* entries of directories read, on the stack (under mu) */
    int waiting, resolver_waits; /* helpers in cond_wait; the resolver in its own (under mu) */
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    chunk c;
} Walker;

#endif
