#include "common.h"

/* ---- the CNN's 2×2 max-pool and ReLU in one pass (models/cnn_ops.py) ----
   relu(maxpool(h)) equals maxpool(relu(h)) (max commutes with a monotone map), so the pooled map is ReLU'd after
   pooling, on a quarter of the values. torch's NCHW max_pool2d_with_indices took ~10 ms a step for the 32×28×28
   maps of a 64-image batch on one Zen 3 core (ad hoc), this pass ~3. Floor mode (an odd last row or column is
   dropped), stride 2, no padding, as F.max_pool2d(h, 2); the winner's index in torch's convention (row·w + column
   within the plane), so torch's max_pool2d_with_indices_backward routes the gradient. Ties go to the window's
   first value in row-major order, as torch's kernel; NaN is not propagated (torch's is; the engine feeds none). */

/* out = relu(max of each 2×2 window) of n planes h × w, idx = the window's winner in its plane */
void fedevo_pool_relu_f32(const float *restrict x, int64_t n, int64_t h, int64_t w, float *restrict out,
                          int64_t *restrict idx) {
    const int64_t ho = h / 2, wo = w / 2;
    for (int64_t p = 0; p < n; p++) {
        const float *xp = x + p * h * w;
        float *op = out + p * ho * wo;
        int64_t *ip = idx + p * ho * wo;
        for (int64_t i = 0; i < ho; i++) {
            const float *r0 = xp + 2 * i * w, *r1 = r0 + w;
            for (int64_t j = 0; j < wo; j++) {  /* branch-free: the winner of random data is unpredictable */
                float m = r0[2 * j];
                int64_t k = 2 * i * w + 2 * j;
                k = r0[2 * j + 1] > m ? 2 * i * w + 2 * j + 1 : k;  m = r0[2 * j + 1] > m ? r0[2 * j + 1] : m;
                k = r1[2 * j] > m ? (2 * i + 1) * w + 2 * j : k;     m = r1[2 * j] > m ? r1[2 * j] : m;
                k = r1[2 * j + 1] > m ? (2 * i + 1) * w + 2 * j + 1 : k; m = r1[2 * j + 1] > m ? r1[2 * j + 1] : m;
                op[i * wo + j] = m > 0.0f ? m : 0.0f;
                ip[i * wo + j] = k;
            }
        }
    }
}
