#include "common.h"
#include <stdlib.h>

/* ---- the dense fp32 MLP step's GEMMs with their elementwise work in the epilogue (models/mlp.py) ----
   For CPUs without native bf16 (issue #16). Eager torch spends, around each batched matmul of a step, separate
   passes on gathering the batch, bias + ReLU, ReLU backward + bias gradient and the SGD update; here they ride
   in the GEMMs' epilogues (or, for the batch, in how A's rows are addressed):
   - fedevo_fwd_f32:   Z = relu(A·W + b), A's rows by index (the batch straight from the chunk's samples);
   - fedevo_dgrad_f32: out = (D·Wᵀ) ⊙ [H > 0] and gb = Σ_rows out (the previous layer's bias gradient);
   - fedevo_wgrad_f32: W += s·mask⊙(Aᵀ·D) in place (plain SGD: the gradient is never written) or G = Aᵀ·D;
   - fedevo_softmax_ce_f32: the output layer's softmax-CE gradient and its bias gradient;
   - fedevo_train_f32: a chunk's whole plain-SGD schedule in one call, client by client (no Python per step, a
     client's weights in cache from step to step), each step the kernels above in the order models/mlp.py's
     `step_f32` calls them.
   The output layer (10 classes) goes through the same GEMMs: an fp32 variant of the bf16 engine's 16-lane head
   kernel (step.c) spilled registers on AVX2 and took ~10× its FLOP share.
   One register-tiled micro-kernel: 6 (edge: 4) rows × 2 (edge: 1) vectors of accumulators; B read in place
   (the forward pass's W, ~20% faster than packing it here) or packed per 2-vector column strip (Wᵀ, D).
   GNU vector extensions with the widest vector the target has: 16 floats with AVX-512, 8 with AVX/AVX2, 4
   otherwise (SSE2 or NEON), so one source builds for every machine (tests/native/test_build.py). */

#if defined(FEDEVO_VW) /* tests only: another target's width (16 on an AVX2 machine runs the AVX-512 tiles) */
#define VW FEDEVO_VW
#elif defined(__AVX512F__)
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
typedef uint8_t vb __attribute__((vector_size(VW)));
/* w uint8 0/1 mask values from m as floats (w >= VW: a full vector), the rest 0: branch-free */
static AI vf ldmask(const uint8_t *m, int64_t w) {
    if (w >= VW) { vb b; memcpy(&b, m, sizeof b); return __builtin_convertvector(b, vf); }
    vf v = (vf){0};
    for (int64_t j = 0; j < w; j++) v[j] = (float)m[j];
    return v;
}
static AI vf relu(vf v) { return (vf)((vi)v & (vi)(v > (vf){0})); }

/* The micro-kernels. mr rows × nv vectors of accumulators (constants after inlining: GCC keeps the unrolled
   arrays in registers), B's row t at B + t·ldb: a packed strip (ldb = NR) or the matrix in place. */
#define UNROLL_MR _Pragma("GCC unroll 6")
#define UNROLL_NV _Pragma("GCC unroll 2")

/* acc[r][j] = Σ_{t<kc} a[r][t] · B[t·ldb + j·VW]: rows of A by pointer */
static AI void tile_rows(const float *const a[MR], const float *restrict B, int64_t ldb, int64_t kc,
                         vf acc[MR][2], const int mr, const int nv) {
    vf c[MR][2];
    UNROLL_MR for (int r = 0; r < mr; r++) UNROLL_NV for (int j = 0; j < nv; j++) c[r][j] = (vf){0};
    for (int64_t t = 0; t < kc; t++) {
        vf bv[2];
        UNROLL_NV for (int j = 0; j < nv; j++) bv[j] = ldu(B + t * ldb + j * VW);
        UNROLL_MR for (int r = 0; r < mr; r++) {
            const vf x = splat(a[r][t]);
            UNROLL_NV for (int j = 0; j < nv; j++) c[r][j] += x * bv[j];
        }
    }
    UNROLL_MR for (int r = 0; r < mr; r++) UNROLL_NV for (int j = 0; j < nv; j++) acc[r][j] = c[r][j];
}

/* acc[r][j] = Σ_{t<m} rows[t][o[r]] · B[t·ldb + j·VW]: the transposed A of a weight gradient (mr of its
   columns) */
static AI void tile_cols(const float *const *rows, const int64_t o[MR], const float *restrict B, int64_t ldb,
                         int64_t m, vf acc[MR][2], const int mr, const int nv) {
    vf c[MR][2];
    int64_t off[MR];
    UNROLL_MR for (int r = 0; r < mr; r++) { off[r] = o[r]; UNROLL_NV for (int j = 0; j < nv; j++) c[r][j] = (vf){0}; }
    for (int64_t t = 0; t < m; t++) {
        const float *row = rows[t];
        vf bv[2];
        UNROLL_NV for (int j = 0; j < nv; j++) bv[j] = ldu(B + t * ldb + j * VW);
        UNROLL_MR for (int r = 0; r < mr; r++) {
            const vf x = splat(row[off[r]]);
            UNROLL_NV for (int j = 0; j < nv; j++) c[r][j] += x * bv[j];
        }
    }
    UNROLL_MR for (int r = 0; r < mr; r++) UNROLL_NV for (int j = 0; j < nv; j++) acc[r][j] = c[r][j];
}

/* the tile for nrows rows (extra rows repeat the last) and w columns: 4 or 6 rows, 1 or 2 vectors */
static void tile_rows_any(const float *const a[MR], const float *B, int64_t ldb, int64_t kc, vf acc[MR][2],
                          int nrows, int64_t w) {
    if (nrows > 4) { if (w > VW) tile_rows(a, B, ldb, kc, acc, 6, 2); else tile_rows(a, B, ldb, kc, acc, 6, 1); }
    else if (w > VW) tile_rows(a, B, ldb, kc, acc, 4, 2);
    else tile_rows(a, B, ldb, kc, acc, 4, 1);
}
static void tile_cols_any(const float *const *rows, const int64_t o[MR], const float *B, int64_t ldb, int64_t m,
                          vf acc[MR][2], int nrows, int64_t w) {
    if (nrows > 4) { if (w > VW) tile_cols(rows, o, B, ldb, m, acc, 6, 2); else tile_cols(rows, o, B, ldb, m, acc, 6, 1); }
    else if (w > VW) tile_cols(rows, o, B, ldb, m, acc, 4, 2);
    else tile_cols(rows, o, B, ldb, m, acc, 4, 1);
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
            /* B in place where a full strip can be read (the forward pass); else a packed, zero-padded strip */
            const int direct = !trans && w == NR;
            if (trans) pack_trans(Bp, B, ldb, k0, kc, n0, w);
            else if (!direct) pack_rows(Bp, B, ldb, k0, kc, n0, w);
            const float *Bt = direct ? B + k0 * ldb + n0 : (const float *)Bp;
            const int64_t ldt = direct ? ldb : NR;
            vf g0 = (vf){0}, g1 = (vf){0};
            for (int64_t m0 = 0; m0 < M; m0 += MR) {
                const int nrows = M - m0 < MR ? (int)(M - m0) : MR;
                const float *a[MR];
                for (int r = 0; r < MR; r++) a[r] = arows[m0 + (r < nrows ? r : nrows - 1)] + k0;
                vf acc[MR][2];
                tile_rows_any(a, Bt, ldt, kc, acc, nrows, w);
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
   Bp: 2·KC vectors of scratch, rows: M pointers of scratch. */
static void fwd_f32(const float *A, const int64_t *idx, const float *W, const float *bias, float *Z, int64_t c,
                    int64_t M, int64_t K, int64_t N, int64_t relu_, vf *Bp, const float **rows) {
    for (int64_t k = 0; k < c; k++) {
        for (int64_t m = 0; m < M; m++) rows[m] = A + (idx ? idx[k * M + m] : k * M + m) * K;
        gemm_rows(rows, M, K, W + k * K * N, N, 0, N, Z + k * M * N, relu_ ? EPI_BIAS_RELU : EPI_BIAS,
                  bias + k * N, 0, 0, Bp);
    }
}

/* The backward pass through a layer W (c, K, N) and the ReLU before it: out[k] (M × K) = (D[k]·W[k]ᵀ) ⊙
   [H[k] > 0], gb[k] (K) = Σ_m out[k][m] (NULL: not computed). D (c, M, N), H and out (c, M, K). */
static void dgrad_f32(const float *D, const float *W, const float *H, float *out, float *gb, int64_t c, int64_t M,
                      int64_t K, int64_t N, vf *Bp, const float **rows) {
    for (int64_t k = 0; k < c; k++) {
        for (int64_t m = 0; m < M; m++) rows[m] = D + (k * M + m) * N;
        gemm_rows(rows, M, N, W + k * K * N, N, 1, K, out + k * M * K, EPI_RELU_BWD, 0, H + k * M * K,
                  gb ? gb + k * K : 0, Bp);
    }
}

/* Weight gradient of a layer for each client k < c: A_k (M × K; rows by idx as in fwd_f32), D[k] (M × N).
   scale NULL: G[k] = A_kᵀ·D[k]; else G is the weight itself, updated in place: G[k] += scale[k]·mask ⊙ A_kᵀ·D[k]
   (mask: NULL or uint8 (K, N), shared by the clients). Dp: 2·M vectors of scratch. */
static void wgrad_f32(const float *A, const int64_t *idx, const float *D, float *G, const float *scale,
                      const uint8_t *mask, int64_t c, int64_t M, int64_t K, int64_t N, vf *Dp, const float **rows) {
    const int64_t strips = (N + NR - 1) / NR;
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
                tile_cols_any(rows, o, (const float *)Dp, NR, M, acc, nrows, w);
                for (int r = 0; r < nrows; r++) {
                    float *g = Gk + (k0 + r) * N + n0;
                    vf v0 = acc[r][0], v1 = acc[r][1];
                    if (scale) {
                        v0 *= s; v1 *= s;
                        if (mask) {
                            const uint8_t *mr = mask + (k0 + r) * N + n0;
                            v0 *= ldmask(mr, w); v1 *= ldmask(mr + VW, w - VW);
                        }
                        v0 += ldp(g, w); v1 += ldp(g + VW, w - VW);
                    }
                    stp(g, v0, w);
                    if (w > VW) stp(g + VW, v1, w - VW);
                }
            }
        }
    }
}

/* The exported single-layer kernels (models/mlp.py `step_f32`, the gradients a privacy hook needs): each
   allocates its scratch and returns 0, or -1 out of memory. */
int64_t fedevo_fwd_f32(const float *A, const int64_t *idx, const float *W, const float *bias, float *Z, int64_t c,
                       int64_t M, int64_t K, int64_t N, int64_t relu_) {
    vf *Bp = alloc_vf(2 * KC);
    const float **rows = malloc(sizeof(float *) * (size_t)(M > 0 ? M : 1));
    if (Bp && rows) fwd_f32(A, idx, W, bias, Z, c, M, K, N, relu_, Bp, rows);
    const int64_t rc = Bp && rows ? 0 : -1;
    free(Bp); free(rows);
    return rc;
}

int64_t fedevo_dgrad_f32(const float *D, const float *W, const float *H, float *out, float *gb, int64_t c,
                         int64_t M, int64_t K, int64_t N) {
    vf *Bp = alloc_vf(2 * KC);
    const float **rows = malloc(sizeof(float *) * (size_t)(M > 0 ? M : 1));
    if (Bp && rows) dgrad_f32(D, W, H, out, gb, c, M, K, N, Bp, rows);
    const int64_t rc = Bp && rows ? 0 : -1;
    free(Bp); free(rows);
    return rc;
}

int64_t fedevo_wgrad_f32(const float *A, const int64_t *idx, const float *D, float *G, const float *scale,
                         const uint8_t *mask, int64_t c, int64_t M, int64_t K, int64_t N) {
    vf *Dp = alloc_vf(2 * (M > 0 ? M : 1));
    const float **rows = malloc(sizeof(float *) * (size_t)(M > 0 ? M : 1));
    if (Dp && rows) wgrad_f32(A, idx, D, G, scale, mask, c, M, K, N, Dp, rows);
    const int64_t rc = Dp && rows ? 0 : -1;
    free(Dp); free(rows);
    return rc;
}

void fedevo_step_bf16(float *p, const void *g, const uint8_t *mask, const float *scale, int64_t c, int64_t n,
                      uint16_t *low, uint64_t key, uint64_t counter, float std, int64_t g32);
void fedevo_softmax_ce_f32(const float *z, const int64_t *y, const float *w, int64_t c, int64_t B, int64_t C,
                           float *out, float *gb);

/* A chunk's whole local training with plain SGD (no privacy hook) through an MLP of L layers (dims[0..L]) in one
   call: per step the kernel sequence of models/mlp.py `step_f32` (forward with bias and ReLU, softmax-CE
   gradient, per layer from the last the input gradient, then the weight gradient's GEMM, here with the weight
   update in its epilogue, then the bias update), but `group` clients at a time, a group's whole schedule before the next
   group's. Clients are independent, so the result is bit for bit the lockstep one; a group's weights and batches
   stay in cache from step to step (with 5 clients of the reference MLP in lockstep, each step streams ~4 MB a
   core through a last-level cache shared with the other core and other tenants), and no Python runs between
   steps. W[i] (c, dims[i], dims[i+1]) and bias[i] (c, dims[i+1]) updated in place; mask[i]: uint8 (dims[i],
   dims[i+1]) or NULL; x (n, dims[0]); step s: rows[s], y[s] (c, used[s]) int64, w[s] (c, used[s]) fp32; scale (c)
   (−lr). Returns 0, or -1 out of memory (nothing changed) or with more than 1024 classes. */
int64_t fedevo_train_f32(int64_t L, const int64_t *dims, float *const *W, float *const *bias,
                         const uint8_t *const *mask, const float *x, int64_t steps, const int64_t *const *rows,
                         const int64_t *const *y, const float *const *w, const int64_t *used, const float *scale,
                         int64_t c, int64_t group) {
    if (L < 1 || L > 64 || dims[L] > 1024 || group < 1) return -1;
    int64_t B = 1;
    for (int64_t s = 0; s < steps; s++) B = used[s] > B ? used[s] : B;
    const int64_t g = group < c ? group : c;
    float *h[64], *d[64], *gb[64];
    int ok = 1;
    for (int64_t i = 0; i < L; i++) {
        h[i] = malloc(sizeof(float) * (size_t)(g * B * dims[i + 1]));
        d[i] = i > 0 ? malloc(sizeof(float) * (size_t)(g * B * dims[i])) : 0;
        gb[i] = malloc(sizeof(float) * (size_t)(g * dims[i + 1]));
        ok &= h[i] && gb[i] && (i == 0 || d[i]);
    }
    vf *Bp = alloc_vf(2 * (KC > B ? KC : B));
    const float **rp = malloc(sizeof(float *) * (size_t)B);
    ok &= Bp && rp;
    for (int64_t k0 = 0; ok && k0 < c; k0 += g) {
        const int64_t n = c - k0 < g ? c - k0 : g;
        for (int64_t s = 0; s < steps; s++) {
            const int64_t b = used[s];
            const int64_t *r = rows[s] + k0 * b;
            for (int64_t i = 0; i < L; i++) {
                const int64_t K = dims[i], N = dims[i + 1];
                fwd_f32(i ? h[i - 1] : x, i ? 0 : r, W[i] + k0 * K * N, bias[i] + k0 * N, h[i], n, b, K, N,
                        i < L - 1, Bp, rp);
            }
            fedevo_softmax_ce_f32(h[L - 1], y[s] + k0 * b, w[s] + k0 * b, n, b, dims[L], h[L - 1], gb[L - 1]);
            float *delta = h[L - 1];
            for (int64_t i = L - 1; i >= 0; i--) {
                const int64_t K = dims[i], N = dims[i + 1];
                float *Wi = W[i] + k0 * K * N;
                if (i > 0) dgrad_f32(delta, Wi, h[i - 1], d[i], gb[i - 1], n, b, K, N, Bp, rp);
                wgrad_f32(i ? h[i - 1] : x, i ? 0 : r, delta, Wi, scale + k0, mask[i], n, b, K, N, Bp, rp);
                fedevo_step_bf16(bias[i] + k0 * N, gb[i], 0, scale + k0, n, N, 0, 0, 0, 0.0f, 1);
                delta = d[i];
            }
        }
    }
    for (int64_t i = 0; i < L; i++) { free(h[i]); free(d[i]); free(gb[i]); }
    free(Bp); free(rp);
    return ok ? 0 : -1;
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
            softmax_ce_row(z + r * C, C, y[r], w[r], e);  /* e is a copy: out may be z */
            for (int64_t j = 0; j < C; j++) { out[r * C + j] = e[j]; g[j] += e[j]; }
        }
    }
}
