#include <stdint.h>
#include <string.h>
#include <math.h>
/* fedevo's fast Gaussian noise (see native.py): counter-based, so pair j of a stream depends only on
   (key, counter + j) and any split of a buffer at multiples of 2*BLOCK gives the same numbers.
   SplitMix64(key + (counter + j)·γ) -> two 24-bit uniforms u1 in (0, 1], u2 in [0, 1) -> one Box-Muller pair
   (the same construction and the same 24-bit resolution as torch's CPU normal_, whose tails also end at
   sqrt(2·ln 2^24) ≈ 5.77 std). Each step is a simple loop over a block so that the compiler vectorises it
   (with -ffast-math, GCC + glibc call libmvec's AVX2/AVX-512 logf/sinf/cosf). */
#define BLOCK 512
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
/* out[0:n] ~ N(0, std^2) i.i.d. (add = 0) or out[0:n] += that noise (add = 1), using counters
   counter .. counter + ceil(n/2) - 1 (per block of 2*BLOCK values: the cosine halves of the pairs, then the sine
   halves). */
/* The values of one block (len <= 2*BLOCK) starting at stream position `counter`, laid out as in a buffer. */
static void noise_block(float *restrict o, int64_t len, uint64_t key, uint64_t counter, float std) {
    float u1[BLOCK], u2[BLOCK], a[BLOCK], b[BLOCK];
    int64_t m = (len + 1) / 2;
    uniforms(u1, u2, m, key, counter);
    box_muller(a, b, u1, u2, m, std);
    for (int64_t i = 0; i < m; i++) o[i] = a[i];
    for (int64_t i = 0; i < len - m; i++) o[m + i] = b[i];
}

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

/* ---- the local SGD step of the bf16 engine, fused (engine.py) ----
   Eager torch needs 3-4 passes over every weight per step (cast the bf16 gradient, masked/clipped update, noise,
   cast the new weight to bf16 for the next forward pass); here it is one. bf16 values travel as uint16 bits. */
static inline float bf16_f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t f_bf16(float f) {  /* round to nearest even, as torch */
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline __attribute__((always_inline)) void step_seg(float *restrict p, const uint16_t *restrict g,
        const uint8_t *restrict m, float s, const float *restrict nz, uint16_t *restrict low, int64_t len,
        const int has_m, const int has_nz, const int has_low) {
    for (int64_t j = 0; j < len; j++) {
        float d = bf16_f(g[j]);
        if (has_m) d = m[j] ? d : 0.0f;
        float v = p[j] + s * d;
        if (has_nz) v += nz[j];
        p[j] = v;
        if (has_low) low[j] = f_bf16(v);
    }
}

/* For k < c, j < n: p[k,j] += scale[k] * mask[j] * g[k,j] (+ N(0, std^2) from the stream when std > 0, the values
   fedevo_add_normal(p, c*n, key, counter, std) would add), then low[k,j] = bf16(p[k,j]).
   mask: NULL (dense) or uint8 0/1 per j; low: NULL or bf16 bits. */
void fedevo_step_bf16(float *p, const uint16_t *g, const uint8_t *mask, const float *scale, int64_t c, int64_t n,
                      uint16_t *low, uint64_t key, uint64_t counter, float std) {
    float nz[2 * BLOCK];
    const int64_t total = c * n;
    for (int64_t start = 0; start < total; start += 2 * BLOCK) {
        int64_t len = total - start < 2 * BLOCK ? total - start : 2 * BLOCK;
        if (std > 0) noise_block(nz, len, key, counter + (uint64_t)(start / 2), std);
        for (int64_t i = start; i < start + len;) {
            int64_t k = i / n, end = (k + 1) * n < start + len ? (k + 1) * n : start + len;
            const uint8_t *mm = mask ? mask + (i - k * n) : 0;
            float *pp = p + i; const uint16_t *gg = g + i; const float *zz = nz + (i - start);
            uint16_t *ll = low ? low + i : 0;
            int64_t L = end - i;
            float sk = scale[k];
            int code = (mask != 0) | ((std > 0) << 1) | ((low != 0) << 2);
            switch (code) {
                case 0: step_seg(pp, gg, mm, sk, zz, ll, L, 0, 0, 0); break;
                case 1: step_seg(pp, gg, mm, sk, zz, ll, L, 1, 0, 0); break;
                case 2: step_seg(pp, gg, mm, sk, zz, ll, L, 0, 1, 0); break;
                case 3: step_seg(pp, gg, mm, sk, zz, ll, L, 1, 1, 0); break;
                case 4: step_seg(pp, gg, mm, sk, zz, ll, L, 0, 0, 1); break;
                case 5: step_seg(pp, gg, mm, sk, zz, ll, L, 1, 0, 1); break;
                case 6: step_seg(pp, gg, mm, sk, zz, ll, L, 0, 1, 1); break;
                default: step_seg(pp, gg, mm, sk, zz, ll, L, 1, 1, 1); break;
            }
            i = end;
        }
    }
}

/* out[k] += sum_j (mask[j] * g[k,j])^2 for bf16 g (c, n), accumulated in double per block. */
void fedevo_sumsq_bf16(const uint16_t *g, const uint8_t *mask, int64_t c, int64_t n, double *out) {
    for (int64_t k = 0; k < c; k++) {
        const uint16_t *gk = g + k * n;
        double acc = 0.0;
        for (int64_t start = 0; start < n; start += 4096) {
            int64_t len = n - start < 4096 ? n - start : 4096;
            float part = 0.0f;
            if (mask) {
                for (int64_t j = 0; j < len; j++) { float d = mask[start + j] ? bf16_f(gk[start + j]) : 0.0f; part += d * d; }
            } else {
                for (int64_t j = 0; j < len; j++) { float d = bf16_f(gk[start + j]); part += d * d; }
            }
            acc += part;
        }
        out[k] += acc;
    }
}
