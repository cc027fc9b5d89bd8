/* The reading of one directory, shared by sif._dirc (a directory a call) and sif._treec
 * (a whole walk a call): readdir and one fstatat a name, into a listing. No Python here:
 * it runs without the GIL, in any thread. The decisions it makes for each entry are
 * described at the top of sif/_dirc.c. */
#ifndef SIF_DIRENT_H
#define SIF_DIRENT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_CLOEXEC
#define O_CLOEXEC 0
#endif

#define CHECK_EVERY 8192

enum { K_FILE = 0, K_FILTERED, K_DIR, K_LINK, K_SPECIAL, K_STAT_ERROR };

typedef struct { /* 64 bytes an entry: a directory of 10^6 entries holds 64 MB here */
    int kind;
    int err;
    unsigned int name_len;
    unsigned int bad_utf8;
    size_t name_off;
    int64_t dev, ino, size, mtime_ns, nlink, ctime_ns;
} entry;

typedef struct {
    entry *items;
    size_t n, cap;
    char *names;
    size_t used, room;
} listing;

static int grow(listing *l, size_t name_len) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        entry *items = realloc(l->items, cap * sizeof(entry));
        if (!items)
            return -1;
        l->items = items;
        l->cap = cap;
    }
    if (l->used + name_len + 1 > l->room) {
        size_t room = l->room ? 2 * l->room : 1024;
        while (room < l->used + name_len + 1)
            room *= 2;
        char *names = realloc(l->names, room);
        if (!names)
            return -1;
        l->names = names;
        l->room = room;
    }
    return 0;
}

/* Whether the n bytes at s are valid UTF-8 (what Python's strict decoder accepts:
 * no overlong forms, no surrogates, nothing above U+10FFFF). */
static int valid_utf8(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned int cp;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += len;
    }
    return 1;
}

static long long ns(struct timespec t) { return (long long)t.tv_sec * 1000000000LL + t.tv_nsec; }

/* Called every CHECK_EVERY entries of a read: nonzero stops it (a signal handler
 * raised, or the walk was closed). */
typedef int (*stop_check)(void *ctx);

/* Read every entry of the open directory dir into l, the decisions of the module comment
 * (sif/_dirc.c) for each; check(ctx) every CHECK_EVERY entries. 0; -1 out of memory;
 * -2 check said stop. A readdir that fails part-way leaves its errno in *dir_err. */
static int read_entries(DIR *dir, int skip_hidden, long long lo, long long hi, int trust_type,
                        listing *l, int *dir_err, stop_check check, void *ctx) {
    int dfd = dirfd(dir);
    size_t since = 0;
    for (;;) {
        if (++since >= CHECK_EVERY) {
            since = 0;
            if (check(ctx))
                return -2;
        }
        errno = 0;
        struct dirent *d = readdir(dir);
        if (!d) {
            *dir_err = errno;
            return 0;
        }
        const char *name = d->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0)))
            continue;
        if (skip_hidden && name[0] == '.')
            continue;
        size_t len = strlen(name);
        if (grow(l, len) != 0)
            return -1;
        entry *e = &l->items[l->n];
        memset(e, 0, sizeof(*e));
        e->name_off = l->used;
        e->name_len = (unsigned int)len; /* NAME_MAX at most */
        memcpy(l->names + l->used, name, len + 1);
        e->bad_utf8 = !valid_utf8((const unsigned char *)name, len);
        int have_stat = 0;
        struct stat st;
        unsigned char type = trust_type ? d->d_type : DT_UNKNOWN;
        if (type == DT_LNK) {
            e->kind = K_LINK;
        } else {
            int r;
            do {
                r = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW);
            } while (r != 0 && errno == EINTR);
            if (r != 0) {
                e->kind = K_STAT_ERROR;
                e->err = errno;
            } else if (type == DT_UNKNOWN && S_ISLNK(st.st_mode)) {
                e->kind = K_LINK; /* what DirEntry.is_symlink() says after its lstat */
            } else {
                have_stat = 1;
            }
        }
        if (have_stat) {
            mode_t m = st.st_mode;
            if (S_ISREG(m))
                e->kind = (st.st_size >= lo && st.st_size <= hi) ? K_FILE : K_FILTERED;
            else if (S_ISDIR(m))
                e->kind = K_DIR;
            else
                e->kind = K_SPECIAL;
            e->dev = (int64_t)st.st_dev;
            e->ino = (int64_t)st.st_ino;
            e->size = (int64_t)st.st_size;
            e->mtime_ns = ns(st.st_mtim);
            e->nlink = (int64_t)st.st_nlink;
            e->ctime_ns = ns(st.st_ctim);
        }
        l->used += len + 1;
        l->n++;
    }
}

static void listing_free(listing *l) {
    free(l->items);
    free(l->names);
    l->items = NULL;
    l->names = NULL;
    l->n = l->cap = l->used = l->room = 0;
}

/* A directory, O_DIRECTORY refusing anything else swapped in; NULL with errno set.
 * opendir itself: glibc opens O_RDONLY | O_NONBLOCK | O_DIRECTORY | O_CLOEXEC and
 * fstats the descriptor. An open() of our own and fdopendir() cost two fcntl() more a
 * directory (fdopendir checks the access mode and sets FD_CLOEXEC): 222 k system
 * calls for a walk of 1 M files in 111 k directories. An open of a directory is never
 * interrupted by a signal (EINTR comes from opens that wait: FIFOs, devices). */
static DIR *open_dir(const char *path) {
    return opendir(path);
}

#endif
