/* BLAKE2b, keyed, with a 16-byte digest: the path keys of sif (sif.pathkeys), computed
 * by sif._treec as the walk meets each file, and for many paths at once.
 *
 * The algorithm is that of RFC 7693 (M-J. Saarinen and J-P. Aumasson, "The BLAKE2
 * Cryptographic Hash and Message Authentication Code (MAC)", November 2015): its
 * initialisation vector and message schedule (section 2.6, 2.7), mixing function G
 * (3.1), compression F (3.2) and padding of the key and the data (3.3). This file was
 * written for sif from that description (it is not a copy of the RFC's appendix C nor of
 * the BLAKE2 team's reference code) and is under sif's licence. tests/test_pathkeys.py
 * holds it to Python's hashlib.blake2b(data, key=key, digest_size=16), byte for byte.
 *
 * Parameters: digest length 16, key length klen (1..64), fanout 1, depth 1; no salt, no
 * personalisation. A keyed hash makes its first block of the key (zero-padded to 128
 * bytes): b2b_key() compresses that block once, and b2b_hash16() starts each path from
 * the state after it (one compression for a path of up to 128 bytes, not two). The
 * digest's first 16 bytes are h[0] and h[1] written little-endian: the two words here.
 */
#ifndef SIF_BLAKE2B_H
#define SIF_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static const uint64_t b2b_iv[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

static const unsigned char b2b_sigma[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, /* rounds 10, 11: as 0, 1 */
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

/* A key made ready: the state after its block, and the block and length (empty data). */
typedef struct {
    uint64_t h[8];
    unsigned char block[128];
    size_t klen;
} b2b_keyed;

static inline uint64_t b2b_rotr(uint64_t x, int n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t b2b_load(const unsigned char *p) { /* little-endian, any machine */
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

#define B2B_G(a, b, c, d, x, y)                                                                   \
    do {                                                                                          \
        v[a] = v[a] + v[b] + (x);                                                                 \
        v[d] = b2b_rotr(v[d] ^ v[a], 32);                                                         \
        v[c] = v[c] + v[d];                                                                       \
        v[b] = b2b_rotr(v[b] ^ v[c], 24);                                                         \
        v[a] = v[a] + v[b] + (y);                                                                 \
        v[d] = b2b_rotr(v[d] ^ v[a], 16);                                                         \
        v[c] = v[c] + v[d];                                                                       \
        v[b] = b2b_rotr(v[b] ^ v[c], 63);                                                         \
    } while (0)

#define B2B_ROUND(r)                                                                              \
    do {                                                                                          \
        B2B_G(0, 4, 8, 12, m[b2b_sigma[r][0]], m[b2b_sigma[r][1]]);                               \
        B2B_G(1, 5, 9, 13, m[b2b_sigma[r][2]], m[b2b_sigma[r][3]]);                               \
        B2B_G(2, 6, 10, 14, m[b2b_sigma[r][4]], m[b2b_sigma[r][5]]);                              \
        B2B_G(3, 7, 11, 15, m[b2b_sigma[r][6]], m[b2b_sigma[r][7]]);                              \
        B2B_G(0, 5, 10, 15, m[b2b_sigma[r][8]], m[b2b_sigma[r][9]]);                              \
        B2B_G(1, 6, 11, 12, m[b2b_sigma[r][10]], m[b2b_sigma[r][11]]);                            \
        B2B_G(2, 7, 8, 13, m[b2b_sigma[r][12]], m[b2b_sigma[r][13]]);                             \
        B2B_G(3, 4, 9, 14, m[b2b_sigma[r][14]], m[b2b_sigma[r][15]]);                             \
    } while (0)

/* F: one 128-byte block into h; t the bytes hashed so far, this block included (the
 * counter's high word is 0: no path reaches 2**64 bytes); last: the final block. */
static void b2b_compress(uint64_t h[8], const unsigned char *block, uint64_t t, int last) {
    uint64_t v[16], m[16];
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = b2b_iv[i];
    }
    v[12] ^= t;
    if (last)
        v[14] = ~v[14];
    for (int i = 0; i < 16; i++)
        m[i] = b2b_load(block + 8 * i);
    /* The rounds written out, their schedule constant: 8% faster than a loop (-O2). */
    B2B_ROUND(0);
    B2B_ROUND(1);
    B2B_ROUND(2);
    B2B_ROUND(3);
    B2B_ROUND(4);
    B2B_ROUND(5);
    B2B_ROUND(6);
    B2B_ROUND(7);
    B2B_ROUND(8);
    B2B_ROUND(9);
    B2B_ROUND(10);
    B2B_ROUND(11);
    for (int i = 0; i < 8; i++)
        h[i] ^= v[i] ^ v[i + 8];
}

/* The parameter block's first word in h (digest length 16, key length klen). */
static void b2b_start(uint64_t h[8], size_t klen) {
    for (int i = 0; i < 8; i++)
        h[i] = b2b_iv[i];
    h[0] ^= 0x01010000ULL ^ ((uint64_t)klen << 8) ^ 16;
}

/* Make key (1..64 bytes) ready for b2b_hash16. */
static void b2b_key(b2b_keyed *k, const unsigned char *key, size_t klen) {
    memset(k->block, 0, sizeof(k->block));
    memcpy(k->block, key, klen);
    k->klen = klen;
    b2b_start(k->h, klen);
    b2b_compress(k->h, k->block, 128, 0); /* not the last: data follows */
}

/* BLAKE2b-128 keyed by k of data: the digest's two little-endian words in out. */
static void b2b_hash16(const b2b_keyed *k, const unsigned char *data, size_t len,
                       uint64_t out[2]) {
    uint64_t h[8];
    if (len == 0) { /* the key's block is the last one */
        b2b_start(h, k->klen);
        b2b_compress(h, k->block, 128, 1);
    } else {
        memcpy(h, k->h, sizeof(h));
        uint64_t t = 128;
        while (len > 128) {
            t += 128;
            b2b_compress(h, data, t, 0);
            data += 128;
            len -= 128;
        }
        unsigned char last[128];
        memcpy(last, data, len);
        memset(last + len, 0, 128 - len);
        b2b_compress(h, last, t + len, 1);
    }
    out[0] = h[0];
    out[1] = h[1];
}

#endif
