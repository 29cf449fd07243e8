#include "common.h"

/* torch.randperm's CPU draws, for the stacked trainer's host plan (fl/engine.py `chunk_draws`): a Mersenne Twister
   (MT19937) seeded as torch.Generator().manual_seed(seed) seeds it (init_genrand with the seed's low 32 bits), and
   each permutation of range(n) by torch's Fisher–Yates (for i < n − 1: swap i with i + random() mod (n − i)). The
   Python side checks these numbers against torch.randperm once per process and uses torch where they differ (a
   torch whose randperm draws otherwise). */

#define MT_N 624
#define MT_M 397

typedef struct { uint32_t s[MT_N]; int i; } mt19937;

static void mt_seed(mt19937 *m, uint32_t seed) {
    m->s[0] = seed;
    for (int j = 1; j < MT_N; j++) m->s[j] = 1812433253u * (m->s[j - 1] ^ (m->s[j - 1] >> 30)) + (uint32_t)j;
    m->i = MT_N;
}

#define MT_MIX(u, v) ((((u) & 0x80000000u) | ((v) & 0x7fffffffu)) >> 1 ^ (((v) & 1u) ? 0x9908b0dfu : 0u))

static void mt_twist(mt19937 *m) {  /* the reference generator's three loops (no index wrap-around inside) */
    uint32_t *s = m->s;
    int k = 0;
    for (; k < MT_N - MT_M; k++) s[k] = s[k + MT_M] ^ MT_MIX(s[k], s[k + 1]);
    for (; k < MT_N - 1; k++) s[k] = s[k + MT_M - MT_N] ^ MT_MIX(s[k], s[k + 1]);
    s[MT_N - 1] = s[MT_M - 1] ^ MT_MIX(s[MT_N - 1], s[0]);
    m->i = 0;
}

static inline uint32_t mt_next(mt19937 *m) {
    if (m->i >= MT_N) mt_twist(m);
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* For each k < count, `repeats` shuffled copies of client k's items (its sizes[k] values of `items`, clients one
after another; NULL: 0..sizes[k]−1), all from one generator seeded with `seed`, as torch draws
[torch.randperm(n, generator=g) for n in sizes for _ in range(repeats)] with g = torch.Generator().manual_seed(seed)
(the swaps applied to the items give items[randperm]). Copy r of client k goes to out + (k·repeats + r)·stride,
its first sizes[k] values (the rest untouched). Returns 0, or -1 for a size < 0 or ≥ 2³²/20 (where torch's randperm
draws otherwise). */
int fedevo_randperms(uint64_t seed, const int64_t *restrict items, const int64_t *restrict sizes, int64_t count,
                     int64_t repeats, int64_t stride, int64_t *restrict out) {
    for (int64_t k = 0; k < count; k++)
        if (sizes[k] < 0 || sizes[k] >= (int64_t)(UINT32_MAX / 20) || sizes[k] > stride) return -1;
    mt19937 m;
    mt_seed(&m, (uint32_t)(seed & 0xffffffffu));
    for (int64_t k = 0; k < count; k++) {
        const int64_t n = sizes[k];
        for (int64_t r = 0; r < repeats; r++) {
            int64_t *o = out + (k * repeats + r) * stride;
            if (items) memcpy(o, items, (size_t)n * sizeof(int64_t));
            else for (int64_t i = 0; i < n; i++) o[i] = i;
            for (int64_t i = 0; i + 1 < n; i++) {  /* n < 2^32: the 32-bit remainder is torch's */
                int64_t z = (int64_t)(mt_next(&m) % (uint32_t)(n - i)) + i, t = o[i];
                o[i] = o[z];
                o[z] = t;
            }
        }
        if (items) items += n;
    }
    return 0;
}
