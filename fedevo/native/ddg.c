#include "common.h"

/* The distributed discrete Gaussian's client encoding (privacy/distributed.py, DDGEncoder): for each coordinate,
   unbiased randomised rounding of x/γ to an integer plus an exact-algorithm discrete Gaussian N_Z(0, σ²) sample
   (Canonne, Kamath & Steinke 2020, Algorithm 3: discrete Laplace proposals of scale t = ⌊σ⌋ + 1, as the difference
   of two geometric variables drawn by inversion, accepted with probability exp(−(|y| − σ²/t)²/(2σ²))) — the same
   algorithm as privacy/ddg.py's numpy sampler, with 53-bit uniforms from a counter-based SplitMix64 stream (key,
   index), so one call's numbers depend only on its key. Proposals are drawn in blocks of CAND so that the
   logarithms and exponentials vectorise; accepted ones are taken in order. As with the numpy sampler, the
   acceptance test runs in floating point (its rounding is not covered by the privacy claim). */

#define CAND 256
#define GOLDEN 0x9e3779b97f4a7c15ULL

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static inline double unit(uint64_t key, uint64_t i) {  /* [0, 1) */
    return (double)(mix64(key + i * GOLDEN) >> 11) * (1.0 / 9007199254740992.0);
}

/* out[i] = round_randomised(x[i]·inv_gamma) + N_Z(0, sigma²), i < n. Returns 0, or -1 for sigma <= 0. */
int fedevo_ddg_encode(const double *restrict x, int64_t n, double inv_gamma, double sigma, uint64_t key,
                      int64_t *restrict out) {
    if (!(sigma > 0)) return -1;
    for (int64_t i = 0; i < n; i++) {
        double y = x[i] * inv_gamma, lo = floor(y);
        out[i] = (int64_t)lo + (unit(key, (uint64_t)i) < y - lo);
    }
    const double t = floor(sigma) + 1.0, c = sigma * sigma / t, k = -1.0 / (2.0 * sigma * sigma);
    const uint64_t key2 = mix64(key ^ 0xd1b54a32d192ed03ULL);
    double y[CAND], a[CAND], u3[CAND];
    uint64_t ctr = 0;
    int64_t filled = 0;
    while (filled < n) {
        for (int j = 0; j < CAND; j++) {
            double u1 = 1.0 - unit(key2, ctr + 3 * (uint64_t)j);      /* (0, 1]: log finite */
            double u2 = 1.0 - unit(key2, ctr + 3 * (uint64_t)j + 1);
            u3[j] = unit(key2, ctr + 3 * (uint64_t)j + 2);
            y[j] = floor(-t * log(u1)) - floor(-t * log(u2));         /* geometric − geometric: discrete Laplace */
        }
        for (int j = 0; j < CAND; j++) {
            double d = fabs(y[j]) - c;
            a[j] = exp(k * d * d);
        }
        ctr += 3 * CAND;
        for (int j = 0; j < CAND && filled < n; j++) {  /* branch-free (a rejected proposal adds 0): half the
                                                             proposals are rejected, at random */
            const int64_t accepted = u3[j] < a[j];
            out[filled] += accepted * (int64_t)y[j];
            filled += accepted;
        }
    }
    return 0;
}
