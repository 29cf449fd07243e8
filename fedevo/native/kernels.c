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

/* ---- SET-sparse MLP local step (fl/sparse.py) ----
   With SET masks at low density most of a dense matmul multiplies zeros. Here every fully-connected layer is a
   CSR list of its active weights (shared by the chunk's clients; values per client, compact), activations are
   stored feature-major (d, Bp) so that one weight touches Bp contiguous batch values, and forward, backward and
   (for plain SGD) the update run over the active weights only, in fp32. Bp = B rounded up to 16; padded batch
   columns carry weight 0. GCC/Clang vector extensions: one v16 = 16 floats (one AVX-512 register). */
typedef float v16 __attribute__((vector_size(64)));
#define NVMAX 8
#define AI inline __attribute__((always_inline))

#ifdef __SSE__
#include <xmmintrin.h>
#endif
#ifdef __AVX512F__
#include <immintrin.h>
static AI float hsum16(v16 v) { return _mm512_reduce_add_ps((__m512)v); }
#else
static AI float hsum16(v16 v) {
    float s[16]; memcpy(s, &v, 64);
    float a = 0.0f;
    for (int t = 0; t < 16; t++) a += s[t];
    return a;
}
#endif

struct smlp {
    int64_t L, c, B, Bp;                 /* weight layers, clients, batch, padded batch */
    const int64_t *dims;                 /* L + 1 widths */
    const int32_t *const *rowptr;        /* per layer: d_in + 1 */
    const int32_t *const *cols;          /* per layer: nnz, output index of each active weight */
    const int64_t *nnz;                  /* per layer */
    float *const *vals;                  /* per layer: (c, nnz) active weight values */
    float *const *bias;                  /* per layer: (c, d_out) */
    float *const *gvals;                 /* per layer: (c, nnz) gradient out, or NULL */
    float *const *gbias;                 /* per layer: (c, d_out) gradient out, or NULL */
};

/* Forward of one layer for one client: zT (dout, Bp) = bias + W^T hT, ReLU unless last. */
static AI void s_forward(const float *restrict hT, float *restrict zT, const int32_t *restrict rp,
                         const int32_t *restrict cols, const float *restrict w, const float *restrict b,
                         int64_t din, int64_t dout, int relu, const int nv) {
    v16 *Z = (v16 *)zT;
    for (int64_t j = 0; j < dout; j++) {
        v16 bj = (v16){0} + b[j];
        for (int v = 0; v < nv; v++) Z[j * nv + v] = bj;
    }
    const v16 *H = (const v16 *)hT;
    for (int64_t i = 0; i < din; i++) {
        v16 h[NVMAX];
        for (int v = 0; v < nv; v++) h[v] = H[i * nv + v];
        for (int32_t e = rp[i]; e < rp[i + 1]; e++) {
            v16 *zj = Z + (int64_t)cols[e] * nv;
            float we = w[e];
            for (int v = 0; v < nv; v++) zj[v] += we * h[v];
        }
    }
    if (relu) {
        int64_t n = dout * nv * 16;
        for (int64_t t = 0; t < n; t++) zT[t] = zT[t] > 0.0f ? zT[t] : 0.0f;
    }
}

/* Backward of one layer for one client. dT (dout, Bp): dL/dz. Writes the active weights' gradients (g, or
   applies w += s·g when s != 0 and g is NULL), the bias gradient, and, when dh != NULL, dL/dh of the layer's
   input masked by the ReLU of that input (hT > 0). The weight is read before it is updated. */
static AI void s_backward(const float *restrict hT, const float *restrict dT, float *restrict dh,
                          const int32_t *restrict rp, const int32_t *restrict cols, float *restrict w,
                          float *restrict b, float *restrict g, float *restrict gb, float s,
                          int64_t din, int64_t dout, const int nv) {
    const v16 *D = (const v16 *)dT;
    for (int64_t j = 0; j < dout; j++) {
        v16 acc = D[j * nv];
        for (int v = 1; v < nv; v++) acc += D[j * nv + v];
        float gj = hsum16(acc);
        if (gb) gb[j] = gj;
        else b[j] += s * gj;
    }
    const v16 *H = (const v16 *)hT;
    v16 *DH = (v16 *)dh;
    for (int64_t i = 0; i < din; i++) {
        v16 h[NVMAX], a[NVMAX];
        for (int v = 0; v < nv; v++) { h[v] = H[i * nv + v]; a[v] = (v16){0}; }
        for (int32_t e = rp[i]; e < rp[i + 1]; e++) {
            const v16 *dj = D + (int64_t)cols[e] * nv;
            float we = w[e];
            v16 p = h[0] * dj[0];
            for (int v = 1; v < nv; v++) p += h[v] * dj[v];
            if (dh) for (int v = 0; v < nv; v++) a[v] += we * dj[v];
            float ge = hsum16(p);
            if (g) g[e] = ge;
            else w[e] = we + s * ge;
        }
        if (dh) {
            for (int v = 0; v < nv; v++) DH[i * nv + v] = a[v];
            float *o = dh + i * nv * 16;
            const float *x = hT + i * nv * 16;
            for (int t = 0; t < nv * 16; t++) o[t] = x[t] > 0.0f ? o[t] : 0.0f;
        }
    }
}

/* dL/dlogits of Σ_b w_b·CE(softmax(z_b), y_b), in place on zT (C, Bp); columns b ≥ B have weight 0. */
static void s_softmax_ce(float *restrict zT, int64_t C, int64_t Bp, int64_t B, const int64_t *restrict y,
                         const float *restrict wb) {
    float m[16 * NVMAX], s[16 * NVMAX], wt[16 * NVMAX];
    for (int64_t b = 0; b < Bp; b++) { m[b] = -3.0e38f; s[b] = 0.0f; wt[b] = b < B ? wb[b] : 0.0f; }
    for (int64_t j = 0; j < C; j++) for (int64_t b = 0; b < Bp; b++) m[b] = zT[j * Bp + b] > m[b] ? zT[j * Bp + b] : m[b];
    for (int64_t j = 0; j < C; j++)
        for (int64_t b = 0; b < Bp; b++) { float e = expf(zT[j * Bp + b] - m[b]); zT[j * Bp + b] = e; s[b] += e; }
    for (int64_t b = 0; b < Bp; b++) s[b] = wt[b] / s[b];
    for (int64_t j = 0; j < C; j++) for (int64_t b = 0; b < Bp; b++) zT[j * Bp + b] *= s[b];
    for (int64_t b = 0; b < B; b++) zT[y[b] * Bp + b] -= wt[b];
}

static AI void s_client(const struct smlp *n, int64_t k, const float *restrict x, int64_t d0,
                        const int64_t *restrict rows, const int64_t *restrict y, const float *restrict wb,
                        const float *scale, float *scratch, const int nv) {
    const int64_t L = n->L, B = n->B, Bp = n->Bp;
    /* scratch: acts[0..L] (d_l, Bp) (acts[L] = logits, then dL/dlogits), two dL/dh buffers */
    float *acts[16] = {0};
    float *p = scratch;
    int64_t dmax = 0;
    for (int64_t l = 0; l <= L; l++) { acts[l] = p; p += n->dims[l] * Bp; if (l > 0 && n->dims[l] > dmax) dmax = n->dims[l]; }
    float *dbuf[2] = {p, p + dmax * Bp};
    /* gather the batch feature-major: acts[0][i][b] = x[rows[b]][i] */
    float *xT = acts[0];
    for (int64_t i0 = 0; i0 < d0; i0 += 16) {
        int64_t iw = d0 - i0 < 16 ? d0 - i0 : 16;
        for (int64_t b = 0; b < Bp; b++) {
            const float *src = b < B ? x + rows[b] * d0 + i0 : 0;
            for (int64_t t = 0; t < iw; t++) xT[(i0 + t) * Bp + b] = src ? src[t] : 0.0f;
        }
    }
    for (int64_t l = 0; l < L; l++)
        s_forward(acts[l], acts[l + 1], n->rowptr[l], n->cols[l], n->vals[l] + k * n->nnz[l],
                  n->bias[l] + k * n->dims[l + 1], n->dims[l], n->dims[l + 1], l < L - 1, nv);
    s_softmax_ce(acts[L], n->dims[L], Bp, B, y, wb);
    const float *delta = acts[L];
    float s = scale ? scale[k] : 0.0f;
    for (int64_t l = L - 1; l >= 0; l--) {
        float *dh = l > 0 ? dbuf[l & 1] : 0;
        s_backward(acts[l], delta, dh, n->rowptr[l], n->cols[l], n->vals[l] + k * n->nnz[l],
                   n->bias[l] + k * n->dims[l + 1], n->gvals ? n->gvals[l] + k * n->nnz[l] : 0,
                   n->gbias ? n->gbias[l] + k * n->dims[l + 1] : 0, s, n->dims[l], n->dims[l + 1], nv);
        delta = dh;
    }
}

/* One local step of c clients. x (rows, d0) fp32 samples; rows/y (c, B) int64; wb (c, B) per-sample weights.
   gvals/gbias NULL: apply p += scale[k]·g in place (plain or per-client-scaled SGD); else write gradients.
   scratch: >= 64 + 4·(Σ dims + 2·max dims)·Bp bytes. Returns 0, or -1 when B > 16·NVMAX. */
int fedevo_smlp_step(int64_t L, const int64_t *dims, const int32_t *const *rowptr, const int32_t *const *cols,
                     const int64_t *nnz, float *const *vals, float *const *bias, float *const *gvals,
                     float *const *gbias, const float *x, const int64_t *rows, const int64_t *y, const float *wb,
                     int64_t c, int64_t B, const float *scale, float *scratch) {
    int64_t Bp = (B + 15) / 16 * 16;
    int nv = (int)(Bp / 16);
    if (nv > NVMAX || L > 15) return -1;
    struct smlp n = {L, c, B, Bp, dims, rowptr, cols, nnz, vals, bias, gvals, gbias};
    float *sc = (float *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
#ifdef __SSE__
    /* flush denormals to zero inside this call (restored below): at a few % density, activations and gradients
       of nearly disconnected units reach the denormal range, where every operation is many times slower */
    unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040);
#endif
    for (int64_t k = 0; k < c; k++) {
        const int64_t *rk = rows + k * B, *yk = y + k * B;
        const float *wk = wb + k * B;
        switch (nv) {
            case 1: s_client(&n, k, x, dims[0], rk, yk, wk, scale, sc, 1); break;
            case 2: s_client(&n, k, x, dims[0], rk, yk, wk, scale, sc, 2); break;
            case 3: s_client(&n, k, x, dims[0], rk, yk, wk, scale, sc, 3); break;
            case 4: s_client(&n, k, x, dims[0], rk, yk, wk, scale, sc, 4); break;
            case 5: s_client(&n, k, x, dims[0], rk, yk, wk, scale, sc, 5); break;
            case 6: s_client(&n, k, x, dims[0], rk, yk, wk, scale, sc, 6); break;
            case 7: s_client(&n, k, x, dims[0], rk, yk, wk, scale, sc, 7); break;
            default: s_client(&n, k, x, dims[0], rk, yk, wk, scale, sc, 8); break;
        }
    }
#ifdef __SSE__
    _mm_setcsr(csr);
#endif
    return 0;
}

/* ---- helpers of the dense bf16 MLP step (models/mlp.py): each replaces 3-5 small torch ops per step ---- */

/* dst[r] = src[idx[r]] for n rows of row_bytes bytes (a chunk's batch of samples). */
void fedevo_gather_rows(void *dst, const void *src, const int64_t *idx, int64_t n, int64_t row_bytes) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
    for (int64_t r = 0; r < n; r++) memcpy(d + r * row_bytes, s + idx[r] * row_bytes, (size_t)row_bytes);
}

/* dL/dlogits of Σ_b w_b·CE for bf16 logits z (c, B, C): delta = (softmax(z) - onehot(y))·w computed in fp32,
   written as bf16 to out, and its fp32 sum over the batch to gb (c, C) (the last bias's gradient). */
void fedevo_softmax_ce_bf16(const uint16_t *z, const int64_t *y, const float *w, int64_t c, int64_t B, int64_t C,
                            uint16_t *out, float *gb) {
    float e[1024];
    if (C > 1024) return;
    for (int64_t k = 0; k < c; k++) {
        float *g = gb + k * C;
        for (int64_t j = 0; j < C; j++) g[j] = 0.0f;
        for (int64_t b = 0; b < B; b++) {
            int64_t r = k * B + b;
            const uint16_t *zr = z + r * C;
            float m = bf16_f(zr[0]);
            for (int64_t j = 1; j < C; j++) { float v = bf16_f(zr[j]); m = v > m ? v : m; }
            float s = 0.0f;
            for (int64_t j = 0; j < C; j++) { e[j] = expf(bf16_f(zr[j]) - m); s += e[j]; }
            float f = w[r] / s;
            for (int64_t j = 0; j < C; j++) e[j] *= f;
            e[y[r]] -= w[r];
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

/* Several plain (no noise) fused steps in one call, one GIL release instead of one per tensor:
   args holds, per tensor, (p, g, mask, n, low, g_is_fp32) as int64; the chunk's c clients share scale. */
void fedevo_step_bf16_many(int64_t m, const int64_t *args, const float *scale, int64_t c) {
    for (int64_t t = 0; t < m; t++) {
        const int64_t *a = args + 6 * t;
        fedevo_step_bf16((float *)a[0], (const void *)a[1], (const uint8_t *)a[2], scale, c, a[3], (uint16_t *)a[4],
                         0, 0, 0.0f, a[5]);
    }
}
