#include "common.h"
#include <stdlib.h>

/* ---- the local SGD step of the bf16 engine, fused (engine.py) ----
   Eager torch needs 3-4 passes over every weight per step (cast the bf16 gradient, masked/clipped update, noise,
   cast the new weight to bf16 for the next forward pass); here it is one. bf16 values travel as uint16 bits. */
static inline __attribute__((always_inline)) void step_seg(float *restrict p, const void *restrict gv,
        const uint8_t *restrict m, float s, const float *restrict nz, uint16_t *restrict low, int64_t len,
        const int has_m, const int has_nz, const int has_low, const int g32) {
    const uint16_t *restrict g = (const uint16_t *)gv;
    const float *restrict gf = (const float *)gv;
    for (int64_t j = 0; j < len; j++) {
        float d = g32 ? gf[j] : bf16_f(g[j]);
        if (has_m) d = m[j] ? d : 0.0f;
        float v = p[j] + s * d;
        if (has_nz) v += nz[j];
        p[j] = v;
        if (has_low) low[j] = f_bf16(v);
    }
}

/* For k < c, j < n: p[k,j] += scale[k] * mask[j] * g[k,j] (+ N(0, std^2) from the stream when std > 0, the values
   fedevo_add_normal(p, c*n, key, counter, std) would add), then low[k,j] = bf16(p[k,j]).
   g: bf16 bits, or fp32 when g32; mask: NULL (dense) or uint8 0/1 per j; low: NULL or bf16 bits. */
void fedevo_step_bf16(float *p, const void *g, const uint8_t *mask, const float *scale, int64_t c, int64_t n,
                      uint16_t *low, uint64_t key, uint64_t counter, float std, int64_t g32) {
    float nz[2 * BLOCK];
    const int64_t total = c * n;
    const int64_t gsize = g32 ? 4 : 2;
    for (int64_t start = 0; start < total; start += 2 * BLOCK) {
        int64_t len = total - start < 2 * BLOCK ? total - start : 2 * BLOCK;
        if (std > 0) noise_block(nz, len, key, counter + (uint64_t)(start / 2), std);
        for (int64_t i = start; i < start + len;) {
            int64_t k = i / n, end = (k + 1) * n < start + len ? (k + 1) * n : start + len;
            const uint8_t *mm = mask ? mask + (i - k * n) : 0;
            float *pp = p + i;
            const void *gg = (const char *)g + i * gsize;
            const float *zz = nz + (i - start);
            uint16_t *ll = low ? low + i : 0;
            int64_t L = end - i;
            float sk = scale[k];
            int code = (mask != 0) | ((std > 0) << 1) | ((low != 0) << 2) | ((g32 != 0) << 3);
            switch (code) {
#define SEG(C) case C: step_seg(pp, gg, mm, sk, zz, ll, L, C & 1, (C >> 1) & 1, (C >> 2) & 1, (C >> 3) & 1); break;
                SEG(0) SEG(1) SEG(2) SEG(3) SEG(4) SEG(5) SEG(6) SEG(7)
                SEG(8) SEG(9) SEG(10) SEG(11) SEG(12) SEG(13) SEG(14) SEG(15)
#undef SEG
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

/* ---- helpers of the dense bf16 MLP step (models/mlp.py): each replaces 3-5 small torch ops per step ---- */

/* dst[r] = src[idx[r]] for n rows of row_bytes bytes (a chunk's batch of samples). */
void fedevo_gather_rows(void *dst, const void *src, const int64_t *idx, int64_t n, int64_t row_bytes) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
    for (int64_t r = 0; r < n; r++) memcpy(d + r * row_bytes, s + idx[r] * row_bytes, (size_t)row_bytes);
}

/* dst[r] = bf16(src[idx[r]]) for n rows of d fp32 values: a chunk's samples, gathered and cast in one pass. */
void fedevo_gather_rows_bf16(uint16_t *dst, const float *src, const int64_t *idx, int64_t n, int64_t d) {
    for (int64_t r = 0; r < n; r++) {
        const float *s = src + idx[r] * d;
        uint16_t *o = dst + r * d;
        for (int64_t j = 0; j < d; j++) o[j] = f_bf16(s[j]);
    }
}

/* dL/dlogits of Σ_b w_b·CE for bf16 logits z (c, B, C): delta = (softmax(z) - onehot(y))·w computed in fp32,
   written as bf16 to out, and its fp32 sum over the batch to gb (c, C) (the last bias's gradient). */
void fedevo_softmax_ce_bf16(const uint16_t *z, const int64_t *y, const float *w, int64_t c, int64_t B, int64_t C,
                            uint16_t *out, float *gb) {
    float zf[1024], e[1024];
    if (C > 1024) return;
    for (int64_t k = 0; k < c; k++) {
        float *g = gb + k * C;
        for (int64_t j = 0; j < C; j++) g[j] = 0.0f;
        for (int64_t b = 0; b < B; b++) {
            int64_t r = k * B + b;
            for (int64_t j = 0; j < C; j++) zf[j] = bf16_f(z[r * C + j]);
            softmax_ce_row(zf, C, y[r], w[r], e);
            for (int64_t j = 0; j < C; j++) { out[r * C + j] = f_bf16(e[j]); g[j] += e[j]; }
        }
    }
}

/* Backward through a ReLU for bf16 (c, B, d): nd = nd where h > 0 else 0, in place, and gb (c, d) = the fp32 sum
   over the batch of the result (the layer's bias gradient). */
void fedevo_relu_bwd_bf16(uint16_t *nd, const uint16_t *h, int64_t c, int64_t B, int64_t d, float *gb) {
    for (int64_t k = 0; k < c; k++) {
        float *g = gb + k * d;
        for (int64_t j = 0; j < d; j++) g[j] = 0.0f;
        for (int64_t b = 0; b < B; b++) {
            uint16_t *row = nd + (k * B + b) * d;
            const uint16_t *hr = h + (k * B + b) * d;
            for (int64_t j = 0; j < d; j++) {
                uint16_t v = bf16_f(hr[j]) > 0.0f ? row[j] : 0;
                row[j] = v;
                g[j] += bf16_f(v);
            }
        }
    }
}

/* The output layer of the dense bf16 MLP step in one pass, in fp32 (models/mlp.py): logits z = h·W + b,
   delta = (softmax(z) - onehot(y))·w, and from it gw = hᵀ·delta (fp32), gb = Σ_b delta (fp32) and
   d = delta·Wᵀ (bf16, NULL for none). For a 10-class head torch spends 3 batched matmuls at ~30 GMAC/s plus the
   softmax; here blocks of 8 rows are walked once while they sit in L1. 16-float vectors (one AVX-512 register):
   logits vectorised over the classes (one vector for up to 16), the two gradients over the input width.
   h (c, B, H) bf16; W (c, H, C) and b (c, C) fp32 (the master weights); y (c, B) int64; w (c, B) fp32.
   Returns 0, or -1 when C > 16 or H > 4096 (the caller then uses torch). */
typedef float hv16 __attribute__((vector_size(64)));
#define HEAD_R 8
int64_t fedevo_head_bf16(const uint16_t *h, const float *W, const float *bias, const int64_t *y, const float *w,
                         int64_t c, int64_t B, int64_t H, int64_t C, float *gw, float *gb, uint16_t *d) {
    if (C > 16 || H > 4096) return -1;
    const int64_t nv = (H + 15) / 16, Hp = nv * 16;
    /* scratch: Wp (H) rows of W padded to 16 lanes; Wt (C, nv) = Wᵀ; Gt (C, nv) = gwᵀ; X (R, nv) the rows */
    hv16 *Wp = aligned_alloc(64, sizeof(hv16) * (size_t)(H + (2 * C + HEAD_R) * nv));
    if (!Wp) return -1;
    hv16 *Wt = Wp + H, *Gt = Wt + C * nv, *X = Gt + C * nv;
    float *wt = (float *)Wt, *gt = (float *)Gt, *x = (float *)X;
    memset(Wp, 0, sizeof(hv16) * (size_t)(H + (2 * C + HEAD_R) * nv));
    for (int64_t k = 0; k < c; k++) {
        const float *Wk = W + k * H * C;
        for (int64_t i = 0; i < H; i++)
            for (int64_t j = 0; j < C; j++) { Wp[i][j] = Wk[i * C + j]; wt[j * Hp + i] = Wk[i * C + j]; }
        memset(Gt, 0, sizeof(hv16) * (size_t)(C * nv));
        hv16 bv = {0}, gbv = {0};
        for (int64_t j = 0; j < C; j++) bv[j] = bias[k * C + j];
        for (int64_t b0 = 0; b0 < B; b0 += HEAD_R) {
            const int64_t R = B - b0 < HEAD_R ? B - b0 : HEAD_R;
            for (int64_t r = 0; r < HEAD_R; r++) {
                const uint16_t *hr = h + (k * B + b0 + r) * H;
                if (r < R) for (int64_t i = 0; i < H; i++) x[r * Hp + i] = bf16_f(hr[i]);
                else for (int64_t i = 0; i < H; i++) x[r * Hp + i] = 0.0f;
            }
            hv16 E[HEAD_R];
            for (int r = 0; r < HEAD_R; r++) E[r] = bv;
            for (int64_t i = 0; i < H; i++) {  /* logits */
                const hv16 wv = Wp[i];
                for (int r = 0; r < HEAD_R; r++) E[r] += x[r * Hp + i] * wv;
            }
            for (int64_t r = 0; r < HEAD_R; r++) {
                const int64_t row = k * B + b0 + r;
                const float wr = r < R ? w[row] : 0.0f;
                if (wr == 0.0f) { E[r] = (hv16){0}; continue; }  /* padding */
                float m = E[r][0], s = 0.0f;
                for (int64_t j = 1; j < C; j++) m = E[r][j] > m ? E[r][j] : m;
                hv16 e = {0};
                for (int64_t j = 0; j < C; j++) { e[j] = expf(E[r][j] - m); s += e[j]; }
                e *= wr / s;
                e[y[row]] -= wr;
                E[r] = e;
                gbv += e;
            }
            for (int64_t j = 0; j < C; j++) {  /* Gt[j] += Σ_r E[r][j]·x[r] */
                float ej[HEAD_R];
                for (int r = 0; r < HEAD_R; r++) ej[r] = E[r][j];
                for (int64_t v = 0; v < nv; v++) {
                    hv16 acc = Gt[j * nv + v];
                    for (int r = 0; r < HEAD_R; r++) acc += ej[r] * X[r * nv + v];
                    Gt[j * nv + v] = acc;
                }
            }
            if (!d) continue;
            for (int64_t v = 0; v < nv; v++) {  /* d[r] = Σ_j E[r][j]·Wt[j] */
                hv16 o[HEAD_R] = {{0}};
                for (int64_t j = 0; j < C; j++) {
                    const hv16 wv = Wt[j * nv + v];
                    for (int r = 0; r < HEAD_R; r++) o[r] += E[r][j] * wv;
                }
                const int64_t n = H - v * 16 < 16 ? H - v * 16 : 16;
                for (int64_t r = 0; r < R; r++) {
                    uint16_t *out = d + (k * B + b0 + r) * H + v * 16;
                    for (int64_t t = 0; t < n; t++) out[t] = f_bf16(o[r][t]);
                }
            }
        }
        for (int64_t j = 0; j < C; j++) gb[k * C + j] = gbv[j];
        float *gk = gw + k * H * C;
        for (int64_t i = 0; i < H; i++)
            for (int64_t j = 0; j < C; j++) gk[i * C + j] = gt[j * Hp + i];
    }
    free(Wp);
    return 0;
}

/* ReLU in place on n bf16 values: negative numbers become +0, NaN stays NaN (as torch's relu_, which here costs
   ~10 µs for a chunk's 64k activations, ~6× this). */
void fedevo_relu_bf16(uint16_t *v, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        const uint16_t u = v[j];
        v[j] = (u > 0x8000u && (u & 0x7fffu) <= 0x7f80u) ? 0 : u;
    }
}
