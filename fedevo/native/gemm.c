#include "common.h"

/* ---- the forward GEMM of the dense bf16 MLP's hidden layers: Z = relu(A·W + b) ----
   torch's bf16 batched matmul reaches ~185 GMAC/s on 64-row batches here and needs separate bias and ReLU
   passes; this register-tiled AVX512-BF16 kernel reaches ~205-210 (ad-hoc, 5×(64×784 @ 784×200)) with both in the
   epilogue. W stays in its row-major (K, N) layout: each pair of rows is interleaved in registers as the
   dpbf16 instruction wants it (free next to the 24 dot-product instructions per k-pair). Without AVX512-BF16 or
   with an odd K it returns -1 and the caller uses torch. */
#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
/* W rows 2p and 2p+1, 16 columns from n, interleaved into the (k, k+1) pairs dpbf16 multiplies */
#define WPAIR(p, n, m) _mm512_permutex2var_epi16( \
    _mm512_castsi256_si512(_mm256_maskz_loadu_epi16((m), W + (2 * (p)) * N + (n))), ilv, \
    _mm512_castsi256_si512(_mm256_maskz_loadu_epi16((m), W + (2 * (p) + 1) * N + (n))))
#define ILV const __m512i ilv = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, \
                                                 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0)

/* bias, ReLU on the bf16 bits (negative numbers to +0, NaN stays: as relu_bf16), store row r of the tile */
static inline __attribute__((always_inline)) void fwd_store(__m512 v, const float *bias, uint16_t *z, __mmask16 m,
                                                            int relu) {
    __m256i u = (__m256i)_mm512_cvtneps_pbh(_mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias)));
    if (relu) {
        const __mmask16 neg = _mm256_cmpgt_epu16_mask(u, _mm256_set1_epi16((short)0x8000)) &
            _mm256_cmple_epu16_mask(_mm256_and_si256(u, _mm256_set1_epi16(0x7fff)), _mm256_set1_epi16(0x7f80));
        u = _mm256_maskz_mov_epi16((__mmask16)~neg, u);
    }
    _mm256_mask_storeu_epi16(z, m, u);
}

/* 6 rows × 64 columns from n0, accumulators as named registers (an array of them GCC keeps mirrored on the
   stack). rows: 6 pointers into A (a short last tile repeats a row), nrows of them stored. */
static void fwd_tile64(const uint32_t *const a[6], int64_t K2, const uint16_t *W, int64_t N, const float *bias,
                       uint16_t *const z[6], int nrows, int64_t n0, int relu) {
    ILV;
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00,
           c20 = c00, c21 = c00, c22 = c00, c23 = c00, c30 = c00, c31 = c00, c32 = c00, c33 = c00,
           c40 = c00, c41 = c00, c42 = c00, c43 = c00, c50 = c00, c51 = c00, c52 = c00, c53 = c00;
    const uint32_t *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    for (int64_t p = 0; p < K2; p++) {
        const __m512bh b0 = (__m512bh)WPAIR(p, n0, 0xffff), b1 = (__m512bh)WPAIR(p, n0 + 16, 0xffff),
                       b2 = (__m512bh)WPAIR(p, n0 + 32, 0xffff), b3 = (__m512bh)WPAIR(p, n0 + 48, 0xffff);
        __m512bh x;
#define ROW(r) x = (__m512bh)_mm512_set1_epi32((int)a##r[p]); c##r##0 = _mm512_dpbf16_ps(c##r##0, x, b0); \
        c##r##1 = _mm512_dpbf16_ps(c##r##1, x, b1); c##r##2 = _mm512_dpbf16_ps(c##r##2, x, b2); \
        c##r##3 = _mm512_dpbf16_ps(c##r##3, x, b3);
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
#undef ROW
    }
    const __m512 c[6][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23},
                            {c30, c31, c32, c33}, {c40, c41, c42, c43}, {c50, c51, c52, c53}};
    for (int r = 0; r < nrows; r++)
        for (int j = 0; j < 4; j++) fwd_store(c[r][j], bias + n0 + 16 * j, z[r] + n0 + 16 * j, 0xffff, relu);
}

/* 6 rows × one vector of up to 16 columns from n0 (the columns left over by fwd_tile64) */
static void fwd_tile16(const uint32_t *const a[6], int64_t K2, const uint16_t *W, int64_t N, const float *bias,
                       uint16_t *const z[6], int nrows, int64_t n0, __mmask16 m, int relu) {
    ILV;
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    const uint32_t *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
    for (int64_t p = 0; p < K2; p++) {
        const __m512bh b = (__m512bh)WPAIR(p, n0, m);
        c0 = _mm512_dpbf16_ps(c0, (__m512bh)_mm512_set1_epi32((int)a0[p]), b);
        c1 = _mm512_dpbf16_ps(c1, (__m512bh)_mm512_set1_epi32((int)a1[p]), b);
        c2 = _mm512_dpbf16_ps(c2, (__m512bh)_mm512_set1_epi32((int)a2[p]), b);
        c3 = _mm512_dpbf16_ps(c3, (__m512bh)_mm512_set1_epi32((int)a3[p]), b);
        c4 = _mm512_dpbf16_ps(c4, (__m512bh)_mm512_set1_epi32((int)a4[p]), b);
        c5 = _mm512_dpbf16_ps(c5, (__m512bh)_mm512_set1_epi32((int)a5[p]), b);
    }
    const __m512 c[6] = {c0, c1, c2, c3, c4, c5};
    for (int r = 0; r < nrows; r++) fwd_store(c[r], bias + n0, z[r] + n0, m, relu);
}

int64_t fedevo_linear_fwd_bf16(const uint16_t *A, const uint16_t *W, const float *bias, uint16_t *Z, int64_t c,
                               int64_t M, int64_t K, int64_t N, int64_t relu) {
    if (K & 1) return -1;  /* rows of W go in pairs */
    const int64_t K2 = K / 2, full = N / 64 * 64;
    for (int64_t k = 0; k < c; k++) {
        const uint16_t *Wk = W + k * K * N;
        const float *bk = bias + k * N;
        for (int64_t m0 = 0; m0 < M; m0 += 6) {
            const int nrows = M - m0 < 6 ? (int)(M - m0) : 6;
            const uint32_t *a[6];
            uint16_t *z[6];
            for (int r = 0; r < 6; r++) {
                const int64_t row = k * M + m0 + (r < nrows ? r : nrows - 1);
                a[r] = (const uint32_t *)(A + row * K);
                z[r] = Z + row * N;
            }
            for (int64_t n0 = 0; n0 < full; n0 += 64) fwd_tile64(a, K2, Wk, N, bk, z, nrows, n0, (int)relu);
            for (int64_t n0 = full; n0 < N; n0 += 16) {
                const int64_t w = N - n0;
                fwd_tile16(a, K2, Wk, N, bk, z, nrows, n0, w >= 16 ? 0xffff : (__mmask16)((1u << w) - 1), (int)relu);
            }
        }
    }
    return 0;
}
#else
int64_t fedevo_linear_fwd_bf16(const uint16_t *A, const uint16_t *W, const float *bias, uint16_t *Z, int64_t c,
                               int64_t M, int64_t K, int64_t N, int64_t relu) {
    (void)A; (void)W; (void)bias; (void)Z; (void)c; (void)M; (void)K; (void)N; (void)relu;
    return -1;
}
#endif
