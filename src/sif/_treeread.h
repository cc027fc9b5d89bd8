/* The reading side of sif._treec (included by _treec.c alone): a directory read into its
 * node, with its files' path keys; the helper threads that read ahead the directories
 * the walk has taken (and their subdirectories), and their start and stop. Nothing here
 * touches Python: it runs without the GIL. See _treec.c. */
#ifndef SIF_TREEREAD_H
#define SIF_TREEREAD_H

#include "_treec.h"

static void node_free(node *nd) {
    if (!nd)
        return;
    if (nd->state == READING) /* a helper reads it: never (see hook_path) */
        __atomic_add_fetch(&freed_reading, 1, __ATOMIC_RELAXED);
    if (nd->pre) {
        for (size_t i = 0; i < nd->l.n; i++)
            node_free(nd->pre[i]);
        free(nd->pre);
    }
    free(nd->path);
    free(nd->keys);
    listing_free(&nd->l);
    free(nd);
}

/* The key of prefix + name (keyed BLAKE2b-128) for each kept file of nd; -1 out of memory. */
static int node_keys(const Walker *w, node *nd, int has_slash) {
    size_t files = 0, longest = 0;
    for (size_t i = 0; i < nd->l.n; i++)
        if (nd->l.items[i].kind == K_FILE) {
            files++;
            if (nd->l.items[i].name_len > longest)
                longest = nd->l.items[i].name_len;
        }
    if (!files)
        return 0;
    nd->keys = malloc(2 * files * sizeof(uint64_t));
    char *buf = malloc(nd->len + longest + 2);
    if (!nd->keys || !buf) {
        free(buf);
        return -1;
    }
    memcpy(buf, nd->path, nd->len);
    size_t plen = nd->len;
    if (!has_slash)
        buf[plen++] = '/';
    size_t f = 0;
    for (size_t i = 0; i < nd->l.n; i++) {
        entry *e = &nd->l.items[i];
        if (e->kind != K_FILE)
            continue;
        memcpy(buf + plen, nd->l.names + e->name_off, e->name_len);
        b2b_hash16(&w->key, (const unsigned char *)buf, plen + e->name_len, nd->keys + 2 * f);
        f++;
    }
    free(buf);
    return 0;
}

/* nd as before it was read. */
static void node_reset(node *nd) {
    free(nd->keys);
    nd->keys = NULL;
    listing_free(&nd->l);
    nd->state = UNREAD;
    nd->open_err = nd->dir_err = nd->failed = 0;
}

static int ends_with_slash(const node *nd) { return nd->len && nd->path[nd->len - 1] == '/'; }

/* Read nd (no lock held, any thread). */
static void read_node(Walker *w, node *nd, stop_check check, void *ctx) {
    DIR *dir = open_dir(nd->path);
    if (!dir) {
        nd->open_err = errno;
        return;
    }
    int r = read_entries(dir, w->skip_hidden, w->lo, w->hi, w->trust_type, &nd->l, &nd->dir_err,
                         check, ctx);
    closedir(dir);
    if (r != 0 || (w->keys && node_keys(w, nd, ends_with_slash(nd)) != 0))
        nd->failed = r == -2 ? -2 : -1;
}

static int helper_check(void *ctx) { return __atomic_load_n(&((Walker *)ctx)->stop, __ATOMIC_RELAXED); }

/* Whether nd lies under hook_path (tests only: a helper holds it). */
static int hooked_below(const node *nd) {
    return hook_len && nd->len > hook_len && nd->path[hook_len] == '/' &&
           memcmp(nd->path, hook_path, hook_len) == 0;
}

/* A new node for the directory prefix + name (or path alone, name NULL). */
static node *new_node(const char *prefix, size_t plen, const char *name, size_t nlen,
                      uint64_t dev, uint64_t ino, uint64_t top_dev, size_t depth) {
    node *nd = calloc(1, sizeof(node));
    if (!nd)
        return NULL;
    nd->len = plen + nlen;
    nd->path = malloc(nd->len + 1);
    if (!nd->path) {
        free(nd);
        return NULL;
    }
    memcpy(nd->path, prefix, plen);
    if (name)
        memcpy(nd->path + plen, name, nlen);
    nd->path[nd->len] = 0;
    nd->dev = dev;
    nd->ino = ino;
    nd->top_dev = top_dev;
    nd->depth = depth;
    return nd;
}

/* The subdirectories of s (read, on the stack) as nodes in s->pre, for a helper to read
 * ahead: those the walk may take (never a skipped one, nor one of another file system
 * with one_fs: the walk opens nothing it would not). Under mu. */
static void make_pre(Walker *w, node *s) {
    s->pre_made = 1;
    size_t dirs = 0;
    for (size_t i = 0; i < s->l.n; i++)
        dirs += s->l.items[i].kind == K_DIR;
    if (!dirs || !(s->pre = calloc(s->l.n, sizeof(node *))))
        return;
    int slash = ends_with_slash(s);
    for (size_t i = 0; i < s->l.n; i++) {
        entry *e = &s->l.items[i];
        uint64_t dev = (uint64_t)e->dev, ino = (uint64_t)e->ino;
        if (e->kind != K_DIR || keyset_has(&w->skip, dev, ino) ||
            (w->one_fs && dev != s->top_dev))
            continue;
        node *k = new_node(s->path, s->len, NULL, 0, dev, ino, s->top_dev, s->depth + 1);
        char *path = k ? realloc(k->path, s->len + 1 + e->name_len + 1) : NULL;
        if (!path) { /* out of memory: fewer read ahead, nothing else changes */
            node_free(k);
            continue;
        }
        k->path = path;
        if (!slash)
            path[k->len++] = '/';
        memcpy(path + k->len, s->l.names + e->name_off, e->name_len);
        k->len += e->name_len;
        path[k->len] = 0;
        s->pre[i] = k;
    }
}

/* What a helper reads next, under mu: in the order the walk will want them, from the
 * top of the stack down, each directory (but the top, the walk's to read), then its
 * subdirectories once it is read. NULL: nothing to read within WINDOW. */
static node *pick(Walker *w) {
    size_t low = w->n > WINDOW ? w->n - WINDOW : 0;
    for (size_t i = w->n; i > low; i--) {
        node *s = w->stack[i - 1];
        if (s->state == UNREAD) {
            if (i < w->n)
                return s;
            continue;
        }
        if (s->state != READ || s->failed)
            continue;
        if (!s->pre_made)
            make_pre(w, s);
        for (; s->pre && s->pre_next < s->l.n; s->pre_next++) {
            node *k = s->pre[s->pre_next];
            if (k && k->state == UNREAD)
                return k;
        }
    }
    return NULL;
}

static void *helper(void *arg) {
    Walker *w = (Walker *)arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        node *nd = w->ahead < AHEAD_MAX ? pick(w) : NULL;
        if (!nd) {
            w->waiting++;
            pthread_cond_wait(&w->work, &w->mu);
            w->waiting--;
            continue;
        }
        nd->state = READING;
        pthread_mutex_unlock(&w->mu);
        if (hooked_below(nd)) { /* tests only: held, unread, until the walker stops */
            while (!helper_check(w))
                usleep(1000);
            nd->failed = -2;
        } else {
            read_node(w, nd, helper_check, w);
        }
        pthread_mutex_lock(&w->mu);
        if (nd->orphan) { /* the walk dropped it meanwhile */
            nd->state = READ;
            node_free(nd);
            continue;
        }
        nd->state = READ;
        w->ahead += nd->l.n;
        if (w->resolver_waits)
            pthread_cond_broadcast(&w->done);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void stop_helpers(Walker *w) {
    if (!w->started)
        return;
    pthread_mutex_lock(&w->mu);
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n_threads; i++)
        pthread_join(w->threads[i], NULL);
    free(w->threads);
    w->threads = NULL;
    w->n_threads = 0;
    w->started = 0;
}

static void start_helpers(Walker *w) {
    w->started = 1;
    w->stop = 0;
    if (w->threads_wanted <= 0)
        return;
    w->threads = calloc((size_t)w->threads_wanted, sizeof(pthread_t));
    if (!w->threads)
        return; /* no helpers: the walk is the same, this thread reads everything */
    for (int i = 0; i < w->threads_wanted; i++) {
        if (pthread_create(&w->threads[i], NULL, helper, w) != 0)
            break;
        w->n_threads++;
    }
}

#endif
