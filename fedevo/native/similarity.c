#include "common.h"
#include <stdlib.h>

/* ---- ULDP-FED recall's sign agreement (privacy/recall.py, eq. 11) in one pass ----
   torch needs sign(a), sign(b), a comparison and a sum (four passes and two temporaries of the update's size),
   plus a gathered copy when only the active coordinates count; per round that is most of the `update`
   mechanism's cost next to training. Sign categories: 0 zero (either sign) and NaN (torch's CPU sign(NaN) is 0),
   1 positive, 2 negative. */
static inline uint8_t cat32(uint32_t u) {
    const uint32_t m = u & 0x7fffffffu;
    return (m > 0x7f800000u || m == 0) ? 0 : (uint8_t)(1 + (u >> 31));
}
static inline uint8_t cat16(uint16_t u) {
    const uint16_t m = u & 0x7fffu;
    return (m > 0x7c00u || m == 0) ? 0 : (uint8_t)(1 + (u >> 15));
}

/* out[r] = #{j in idx : sgn(a[r, j]) = sgn(b[j])} for rows r of a (rows, P), fp32 or fp16 bits (a16 != 0);
   idx: n coordinates, or NULL for all P. Returns 0, or -1 when out of memory. */
int64_t fedevo_sign_agree(const void *a, int64_t a16, int64_t rows, int64_t P, const float *b, const int64_t *idx,
                          int64_t n, int64_t *out) {
    uint8_t *tb = malloc((size_t)P);
    if (!tb) return -1;
    const uint32_t *bu = (const uint32_t *)b;
    for (int64_t j = 0; j < P; j++) tb[j] = cat32(bu[j]);
    for (int64_t r = 0; r < rows; r++) {
        int64_t cnt = 0;
        if (a16) {
            const uint16_t *ar = (const uint16_t *)a + r * P;
            if (idx) for (int64_t j = 0; j < n; j++) cnt += cat16(ar[idx[j]]) == tb[idx[j]];
            else for (int64_t j = 0; j < P; j++) cnt += cat16(ar[j]) == tb[j];
        } else {
            const uint32_t *ar = (const uint32_t *)a + r * P;
            if (idx) for (int64_t j = 0; j < n; j++) cnt += cat32(ar[idx[j]]) == tb[idx[j]];
            else for (int64_t j = 0; j < P; j++) cnt += cat32(ar[j]) == tb[j];
        }
        out[r] = cnt;
    }
    free(tb);
    return 0;
}
