/* Shared by fedevo's native kernels (see __init__.py): bf16 <-> fp32 and the noise stream's block. */
#pragma once
#include <stdint.h>
#include <string.h>
#include <math.h>

#define BLOCK 512  /* noise pairs per block: buffers split at multiples of 2*BLOCK values give identical numbers */

static inline float bf16_f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t f_bf16(float f) {  /* round to nearest even, as torch */
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}


/* The values of one block (len <= 2*BLOCK) of the Gaussian stream starting at pair `counter` (noise.c). */
__attribute__((visibility("hidden")))
void noise_block(float *restrict o, int64_t len, uint64_t key, uint64_t counter, float std);

/* One row of the weighted softmax-CE gradient from fp32 logits z (C values): e = (softmax(z) − onehot(y))·w
   (the fp32 and bf16 output-layer kernels, dense32.c and step.c, load and store around it). */
static inline void softmax_ce_row(const float *restrict z, int64_t C, int64_t y, float w, float *restrict e) {
    float m = z[0], s = 0.0f;
    for (int64_t j = 1; j < C; j++) m = z[j] > m ? z[j] : m;
    for (int64_t j = 0; j < C; j++) { e[j] = expf(z[j] - m); s += e[j]; }
    const float f = w / s;
    for (int64_t j = 0; j < C; j++) e[j] *= f;
    e[y] -= w;
}
