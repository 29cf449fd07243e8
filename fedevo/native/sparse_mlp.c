#include "common.h"

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

