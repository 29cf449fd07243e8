#include "common.h"

/* fedevo's fast Gaussian noise (see __init__.py): counter-based, so pair j of a stream depends only on
   (key, counter + j) and any split of a buffer at multiples of 2*BLOCK gives the same numbers.
   SplitMix64(key + (counter + j)·γ) -> two 24-bit uniforms u1 in (0, 1], u2 in [0, 1) -> one Box-Muller pair
   (the same construction and the same 24-bit resolution as torch's CPU normal_, whose tails also end at
   sqrt(2·ln 2^24) ≈ 5.77 std). Each step is a simple loop over a block so that the compiler vectorises it
   (with -ffast-math, GCC + glibc call libmvec's AVX2/AVX-512 logf/sinf/cosf). */
static inline uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static void uniforms(float *restrict u1, float *restrict u2, int64_t m, uint64_t key, uint64_t counter) {
    const float s24 = 1.0f / 16777216.0f;
    for (int64_t i = 0; i < m; i++) {
        uint64_t z = mix(key + (counter + (uint64_t)i) * 0x9e3779b97f4a7c15ULL);
        u1[i] = (float)(int32_t)(z >> 40) * s24 + s24;              /* (0, 1]: log finite */
        u2[i] = (float)(int32_t)((z >> 8) & 0xffffff) * s24;        /* [0, 1) */
    }
}
static void box_muller(float *restrict a, float *restrict b, const float *restrict u1,
                       const float *restrict u2, int64_t m, float std) {
    const float two_pi = 6.283185307179586f;
    for (int64_t i = 0; i < m; i++) a[i] = std * sqrtf(-2.0f * logf(u1[i]));   /* radius */
    for (int64_t i = 0; i < m; i++) b[i] = a[i] * sinf(two_pi * u2[i]);
    for (int64_t i = 0; i < m; i++) a[i] = a[i] * cosf(two_pi * u2[i]);
}
/* The values of one block (len <= 2*BLOCK) starting at stream position `counter`, laid out as in a buffer. */
void noise_block(float *restrict o, int64_t len, uint64_t key, uint64_t counter, float std) {
    float u1[BLOCK], u2[BLOCK], a[BLOCK], b[BLOCK];
    int64_t m = (len + 1) / 2;
    uniforms(u1, u2, m, key, counter);
    box_muller(a, b, u1, u2, m, std);
    for (int64_t i = 0; i < m; i++) o[i] = a[i];
    for (int64_t i = 0; i < len - m; i++) o[m + i] = b[i];
}

/* out[0:n] ~ N(0, std^2) i.i.d. (add = 0) or out[0:n] += that noise (add = 1), using counters
   counter .. counter + ceil(n/2) - 1 (per block of 2*BLOCK values: the cosine halves of the pairs, then the sine
   halves). */
static void noise(float *out, int64_t n, uint64_t key, uint64_t counter, float std, int add) {
    float z[2 * BLOCK];
    for (int64_t start = 0; start < n; start += 2 * BLOCK) {
        int64_t len = n - start < 2 * BLOCK ? n - start : 2 * BLOCK;
        float *restrict o = out + start;
        if (add) {
            noise_block(z, len, key, counter + (uint64_t)(start / 2), std);
            for (int64_t i = 0; i < len; i++) o[i] += z[i];
        } else {
            noise_block(o, len, key, counter + (uint64_t)(start / 2), std);
        }
    }
}

void fedevo_fill_normal(float *out, int64_t n, uint64_t key, uint64_t counter, float std) {
    noise(out, n, key, counter, std, 0);
}

void fedevo_add_normal(float *out, int64_t n, uint64_t key, uint64_t counter, float std) {
    noise(out, n, key, counter, std, 1);
}

/* out[i] += (z_i · std_rows[i / n]) · mask[i % n] for i in [start, start + len) of a (rows, n) buffer, z_i the
   values fedevo_fill_normal(·, rows·n, key, counter, 1) would write at i (start: a multiple of 2*BLOCK; mask NULL:
   all ones). ULDP-FED's upload noise (per-client std, zero on coordinates SET does not use) in one pass. */
__attribute__((optimize("fp-contract=off")))  /* no fused multiply-add: the same roundings as the torch ops */
void fedevo_add_normal_rows(float *out, int64_t n, int64_t start, int64_t len, uint64_t key, uint64_t counter,
                            const float *std_rows, const float *mask) {
    float z[2 * BLOCK];
    for (int64_t s = start; s < start + len; s += 2 * BLOCK) {
        int64_t m = start + len - s < 2 * BLOCK ? start + len - s : 2 * BLOCK;
        noise_block(z, m, key, counter + (uint64_t)(s / 2), 1.0f);
        for (int64_t i = s; i < s + m;) {
            int64_t k = i / n, end = (k + 1) * n < s + m ? (k + 1) * n : s + m;
            float sd = std_rows[k];
            float *o = out + i;
            const float *zz = z + (i - s);
            if (mask) {
                const float *mk = mask + (i - k * n);
                for (int64_t j = 0; j < end - i; j++) o[j] += (zz[j] * sd) * mk[j];
            } else {
                for (int64_t j = 0; j < end - i; j++) o[j] += zz[j] * sd;
            }
            i = end;
        }
    }
}

