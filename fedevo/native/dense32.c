#include "common.h"
#include <stdlib.h>

/* ---- the dense fp32 MLP step's GEMMs with their elementwise work in the epilogue (models/mlp.py) ----
   For CPUs without native bf16 (issue #16). Eager torch spends, around each batched matmul of a step, separate
   passes on gathering the batch, bias + ReLU, ReLU backward + bias gradient and the SGD update; here they ride
   in the GEMMs' epilogues (or, for the batch, in how A's rows are addressed):
   - fedevo_fwd_f32:   Z = relu(A·W + b), A's rows by index (the batch straight from the chunk's samples);
   - fedevo_dgrad_f32: out = (D·Wᵀ) ⊙ [H > 0] and gb = Σ_rows out (the previous layer's bias gradient);
   - fedevo_wgrad_f32: W += s·mask⊙(Aᵀ·D) in place (plain SGD: the gradient is never written) or G = Aᵀ·D;
   - fedevo_softmax_ce_f32: the output layer's softmax-CE gradient and its bias gradient.
   The output layer (10 classes) goes through the same GEMMs: a 16-lane head kernel as the bf16 engine's
   (step.c) spills on AVX2 and took ~10× its FLOP share.
   One register-tiled micro-kernel: 6 rows × 2 vectors of accumulators, B packed per 2-vector column strip
   (zero-padded, KC rows of it in L1). GNU vector extensions with the widest vector the target has: 16 floats
   with AVX-512, 8 with AVX/AVX2, 4 otherwise (SSE2 or NEON), so one source builds for every machine. */

#if defined(__AVX512F__)
#define VW 16
#elif defined(__AVX__)
#define VW 8
#else
#define VW 4
#endif
typedef float vf __attribute__((vector_size(VW * 4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
#define NR (2 * VW) /* columns per strip */
#define MR 6        /* rows per tile */
#define KC 1024     /* inner-dimension block at most (a packed strip of KC × NR floats stays in L2), split evenly */
#define AI inline __attribute__((always_inline))

static AI vf splat(float a) { return (vf){0} + a; }
static AI vf ldu(const float *p) { vf v; memcpy(&v, p, sizeof v); return v; }
static AI void stu(float *p, vf v) { memcpy(p, &v, sizeof v); }
/* w valid lanes from p (w >= VW: a full vector), the rest 0 */
static AI vf ldp(const float *p, int64_t w) {
    if (w >= VW) return ldu(p);
    vf v = (vf){0};
    for (int64_t j = 0; j < w; j++) v[j] = p[j];
    return v;
}
static AI void stp(float *p, vf v, int64_t w) {
    if (w >= VW) { stu(p, v); return; }
    for (int64_t j = 0; j < w; j++) p[j] = v[j];
}
static AI vf relu(vf v) { return (vf)((vi)v & (vi)(v > (vf){0})); }

/* acc[r][0..1] = Σ_{t<kc} a_r[t] · Bp[t]: rows of A by pointer */
static AI void tile_rows(const float *const a[MR], const vf *restrict Bp, int64_t kc, vf acc[MR][2]) {
    vf c00 = (vf){0}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00,
       c41 = c00, c50 = c00, c51 = c00;
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    for (int64_t t = 0; t < kc; t++) {
        const vf b0 = Bp[2 * t], b1 = Bp[2 * t + 1];
        vf x;
#define ROW(r) x = splat(a##r[t]); c##r##0 += x * b0; c##r##1 += x * b1;
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
    }
    acc[0][0] = c00; acc[0][1] = c01; acc[1][0] = c10; acc[1][1] = c11; acc[2][0] = c20; acc[2][1] = c21;
    acc[3][0] = c30; acc[3][1] = c31; acc[4][0] = c40; acc[4][1] = c41; acc[5][0] = c50; acc[5][1] = c51;
}

/* acc[r][0..1] = Σ_{t<m} rows[t][o_r] · Bp[t]: the transposed A of a weight gradient (6 of its columns) */
static AI void tile_cols(const float *const *rows, const int64_t o[MR], const vf *restrict Bp, int64_t m,
                         vf acc[MR][2]) {
    vf c00 = (vf){0}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00,
       c41 = c00, c50 = c00, c51 = c00;
    const int64_t o0 = o[0], o1 = o[1], o2 = o[2], o3 = o[3], o4 = o[4], o5 = o[5];
    for (int64_t t = 0; t < m; t++) {
        const float *r = rows[t];
        const vf b0 = Bp[2 * t], b1 = Bp[2 * t + 1];
        vf x;
#define ROW(q) x = splat(r[o##q]); c##q##0 += x * b0; c##q##1 += x * b1;
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
    }
    acc[0][0] = c00; acc[0][1] = c01; acc[1][0] = c10; acc[1][1] = c11; acc[2][0] = c20; acc[2][1] = c21;
    acc[3][0] = c30; acc[3][1] = c31; acc[4][0] = c40; acc[4][1] = c41; acc[5][0] = c50; acc[5][1] = c51;
}

/* Bp[t][0..NR) = B[k0 + t][n0 .. n0 + w) zero-padded, B row-major with row stride ld */
static void pack_rows(vf *restrict Bp, const float *B, int64_t ld, int64_t k0, int64_t kc, int64_t n0, int64_t w) {
    for (int64_t t = 0; t < kc; t++) {
        const float *src = B + (k0 + t) * ld + n0;
        Bp[2 * t] = ldp(src, w);
        Bp[2 * t + 1] = ldp(src + VW, w - VW);
    }
}

/* Bp[t][jj] = W[n0 + jj][k0 + t] (jj < w, else 0): Wᵀ's strip, W row-major (rows, ld) */
static void pack_trans(vf *restrict Bp, const float *W, int64_t ld, int64_t k0, int64_t kc, int64_t n0, int64_t w) {
    float *o = (float *)Bp;
    for (int64_t t = 0; t < kc; t++)
        for (int64_t jj = 0; jj < NR; jj++) o[t * NR + jj] = 0.0f;
    for (int64_t jj = 0; jj < w; jj++) {
        const float *src = W + (n0 + jj) * ld + k0;
        for (int64_t t = 0; t < kc; t++) o[t * NR + jj] = src[t];
    }
}

enum { EPI_BIAS = 0, EPI_BIAS_RELU = 1, EPI_RELU_BWD = 2 };

/* Z (M × N) of one client = epilogue(A·B), A's rows by pointer (length K), B given by its packing (W for the
   forward pass, Wᵀ for the backward one). EPI_BIAS(_RELU): + bias (N), ReLU; EPI_RELU_BWD: ⊙ [H > 0] (H like Z)
   and gb (N) = Σ_rows of the result. */
static void gemm_rows(const float *const *arows, int64_t M, int64_t K, const float *B, int64_t ldb, int trans,
                      int64_t N, float *Z, int epi, const float *bias, const float *H, float *gb, vf *Bp) {
    if (gb) for (int64_t n = 0; n < N; n++) gb[n] = 0.0f;
    for (int64_t n0 = 0; n0 < N; n0 += NR) {
        const int64_t w = N - n0 < NR ? N - n0 : NR;
        const int64_t kb = (K + KC - 1) / KC, kcb = (K + kb - 1) / kb;  /* 784: one block, 2000: 2 of 1000 */
        for (int64_t k0 = 0; k0 < K; k0 += kcb) {
            const int64_t kc = K - k0 < kcb ? K - k0 : kcb;
            const int first = k0 == 0, last = k0 + kc == K;
            if (trans) pack_trans(Bp, B, ldb, k0, kc, n0, w);
            else pack_rows(Bp, B, ldb, k0, kc, n0, w);
            vf g0 = (vf){0}, g1 = (vf){0};
            for (int64_t m0 = 0; m0 < M; m0 += MR) {
                const int nrows = M - m0 < MR ? (int)(M - m0) : MR;
                const float *a[MR];
                for (int r = 0; r < MR; r++) a[r] = arows[m0 + (r < nrows ? r : nrows - 1)] + k0;
                vf acc[MR][2];
                tile_rows(a, Bp, kc, acc);
                for (int r = 0; r < nrows; r++) {
                    float *z = Z + (m0 + r) * N + n0;
                    vf v0 = acc[r][0], v1 = acc[r][1];
                    if (!first) { v0 += ldp(z, w); v1 += ldp(z + VW, w - VW); }
                    if (last) {
                        if (epi == EPI_RELU_BWD) {
                            const float *h = H + (m0 + r) * N + n0;
                            v0 = (vf)((vi)v0 & (vi)(ldp(h, w) > (vf){0}));
                            v1 = (vf)((vi)v1 & (vi)(ldp(h + VW, w - VW) > (vf){0}));
                            g0 += v0; g1 += v1;
                        } else {
                            v0 += ldp(bias + n0, w); v1 += ldp(bias + n0 + VW, w - VW);
                            if (epi == EPI_BIAS_RELU) { v0 = relu(v0); v1 = relu(v1); }
                        }
                    }
                    stp(z, v0, w);
                    if (w > VW) stp(z + VW, v1, w - VW);
                }
            }
            if (last && gb) {
                stp(gb + n0, g0, w);
                if (w > VW) stp(gb + n0 + VW, g1, w - VW);
            }
        }
    }
}

static vf *alloc_vf(int64_t n) { return aligned_alloc(64, (size_t)((n * (int64_t)sizeof(vf) + 63) / 64 * 64)); }

/* For each client k < c: Z[k] (M × N) = A_k·W[k] + bias[k], ReLU when relu. A_k's row m: A + row·K with row =
   idx[k·M + m] (idx: NULL for k·M + m). W (c, K, N), bias (c, N), Z (c, M, N), all fp32 row-major.
   Returns 0, or -1 out of memory. */
int64_t fedevo_fwd_f32(const float *A, const int64_t *idx, const float *W, const float *bias, float *Z, int64_t c,
                       int64_t M, int64_t K, int64_t N, int64_t relu_) {
    vf *Bp = alloc_vf(2 * KC);
    const float **rows = malloc(sizeof(float *) * (size_t)(M > 0 ? M : 1));
    if (!Bp || !rows) { free(Bp); free(rows); return -1; }
    for (int64_t k = 0; k < c; k++) {
        for (int64_t m = 0; m < M; m++) rows[m] = A + (idx ? idx[k * M + m] : k * M + m) * K;
        gemm_rows(rows, M, K, W + k * K * N, N, 0, N, Z + k * M * N, relu_ ? EPI_BIAS_RELU : EPI_BIAS,
                  bias + k * N, 0, 0, Bp);
    }
    free(Bp); free(rows);
    return 0;
}

/* The backward pass through a layer W (c, K, N) and the ReLU before it: out[k] (M × K) = (D[k]·W[k]ᵀ) ⊙
   [H[k] > 0], gb[k] (K) = Σ_m out[k][m] (NULL: not computed). D (c, M, N), H and out (c, M, K).
   Returns 0, or -1 out of memory. */
int64_t fedevo_dgrad_f32(const float *D, const float *W, const float *H, float *out, float *gb, int64_t c,
                         int64_t M, int64_t K, int64_t N) {
    vf *Bp = alloc_vf(2 * KC);
    const float **rows = malloc(sizeof(float *) * (size_t)(M > 0 ? M : 1));
    if (!Bp || !rows) { free(Bp); free(rows); return -1; }
    for (int64_t k = 0; k < c; k++) {
        for (int64_t m = 0; m < M; m++) rows[m] = D + (k * M + m) * N;
        gemm_rows(rows, M, N, W + k * K * N, N, 1, K, out + k * M * K, EPI_RELU_BWD, 0, H + k * M * K,
                  gb ? gb + k * K : 0, Bp);
    }
    free(Bp); free(rows);
    return 0;
}

/* Weight gradient of a layer for each client k < c: A_k (M × K; rows by idx as in fedevo_fwd_f32), D[k] (M × N).
   scale NULL: G[k] = A_kᵀ·D[k]; else G is the weight itself, updated in place: G[k] += scale[k]·mask ⊙ A_kᵀ·D[k]
   (mask: NULL or uint8 (K, N), shared by the clients). Returns 0, or -1 out of memory. */
int64_t fedevo_wgrad_f32(const float *A, const int64_t *idx, const float *D, float *G, const float *scale,
                         const uint8_t *mask, int64_t c, int64_t M, int64_t K, int64_t N) {
    const int64_t strips = (N + NR - 1) / NR;
    vf *Dp = alloc_vf(2 * (M > 0 ? M : 1));
    const float **rows = malloc(sizeof(float *) * (size_t)(M > 0 ? M : 1));
    if (!Dp || !rows) { free(Dp); free(rows); return -1; }
    for (int64_t k = 0; k < c; k++) {
        for (int64_t m = 0; m < M; m++) rows[m] = A + (idx ? idx[k * M + m] : k * M + m) * K;
        const float *Dk = D + k * M * N;
        float *Gk = G + k * K * N;
        const vf s = splat(scale ? scale[k] : 0.0f);
        for (int64_t st = 0; st < strips; st++) {
            const int64_t n0 = st * NR, w = N - n0 < NR ? N - n0 : NR;
            pack_rows(Dp, Dk, N, 0, M, n0, w);
            for (int64_t k0 = 0; k0 < K; k0 += MR) {
                const int nrows = K - k0 < MR ? (int)(K - k0) : MR;
                int64_t o[MR];
                for (int r = 0; r < MR; r++) o[r] = k0 + (r < nrows ? r : nrows - 1);
                vf acc[MR][2];
                tile_cols(rows, o, Dp, M, acc);
                for (int r = 0; r < nrows; r++) {
                    float *g = Gk + (k0 + r) * N + n0;
                    vf v0 = acc[r][0], v1 = acc[r][1];
                    if (scale) {
                        v0 *= s; v1 *= s;
                        if (mask) {
                            const uint8_t *mr = mask + (k0 + r) * N + n0;
                            for (int64_t j = 0; j < w; j++) {
                                if (j < VW) { if (!mr[j]) v0[j] = 0.0f; }
                                else if (!mr[j]) v1[j - VW] = 0.0f;
                            }
                        }
                        v0 += ldp(g, w); v1 += ldp(g + VW, w - VW);
                    }
                    stp(g, v0, w);
                    if (w > VW) stp(g + VW, v1, w - VW);
                }
            }
        }
    }
    free(Dp); free(rows);
    return 0;
}

/* dL/dlogits of Σ_b w_b·CE for fp32 logits z (c, B, C): out = (softmax(z) - onehot(y))·w (out may be z) and
   gb (c, C) = Σ_b out (the output layer's bias gradient). */
void fedevo_softmax_ce_f32(const float *z, const int64_t *y, const float *w, int64_t c, int64_t B, int64_t C,
                           float *out, float *gb) {
    float e[1024];
    if (C > 1024) return;
    for (int64_t k = 0; k < c; k++) {
        float *g = gb + k * C;
        for (int64_t j = 0; j < C; j++) g[j] = 0.0f;
        for (int64_t b = 0; b < B; b++) {
            const int64_t r = k * B + b;
            const float *zr = z + r * C;
            float m = zr[0], s = 0.0f;
            for (int64_t j = 1; j < C; j++) m = zr[j] > m ? zr[j] : m;
            for (int64_t j = 0; j < C; j++) { e[j] = expf(zr[j] - m); s += e[j]; }
            const float f = w[r] / s;
            for (int64_t j = 0; j < C; j++) e[j] *= f;
            e[y[r]] -= w[r];
            for (int64_t j = 0; j < C; j++) { out[r * C + j] = e[j]; g[j] += e[j]; }
        }
    }
}
