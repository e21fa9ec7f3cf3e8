/* The C twin of engine/sampler.py: the spec's stage order for a whole batch in one call, reading the
 * float32 logits in place.
 *
 * How a row is done without copying or fully sorting it:
 * - Penalized tokens become a short list of "overrides" (token, float64 value); their places in the
 *   row are hidden by working on a private copy of only the 128-float blocks that hold them.
 * - Pass A keeps each block's largest order-preserving int32 key of a float (vectorizes well);
 *   greedy rows and the top-k threshold need nothing more.
 * - Top-k collects only the tokens at or above a threshold that at least k tokens reach (just
 *   under the k-th largest block maximum), drops the few extra, and finishes on those k exactly as
 *   the spec says.
 * - Without top-k the softmax sum needs every token: a bounded float32 sum (pass F; far blocks
 *   coarser still) decides unless its bound leaves the decision open, then the exact float64 one
 *   (pass B). Top-p then collects tokens above a falling threshold until their mass covers top_p,
 *   ranks just those, and min-p and the draw work on the survivors. Sampling from the whole
 *   vocabulary walks block sums to the block where the draw lands.
 * The arithmetic matches the Python twin's float64 operations one for one, except for the order
 * of the softmax sum and the last bit of exp: those can only move an exact boundary (near-ties).
 */
#include "native_paths.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#define BLOCK 128

#if defined(__GNUC__) && defined(__x86_64__) && defined(__linux__) && !defined(NP_NO_CLONES)
/* One build runs on any x86-64; the loader picks the widest vector unit at run time. */
#define NP_HAVE_CLONES 1
#define NP_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define NP_PLAIN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define NP_CLONES
#define NP_PLAIN_CLONES
#endif

/* ---- Keys: an int32 per float that orders like the float (-0 and +0 equal), so that maxima
 * vectorize as integer maxima without -ffast-math. NaNs sort beyond +-inf. ---- */

#define KEY_NEG_INF (-0x7F800000)
#define KEY_POS_INF 0x7F800000

static inline int32_t float_key(float value) {
    int32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits < 0 ? -(bits & 0x7FFFFFFF) : bits;
}

static inline float key_float(int32_t key) {
    int32_t bits = key < 0 ? (int32_t)((uint32_t)(-key) | 0x80000000u) : key;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Bit i says data[i] >= threshold, for the 64 floats from data: the candidate scans then visit only
 * the tokens that pass, with no branch per float (a block they read has a token or two to take). */
static inline uint64_t reaching_bits(const float *data, float threshold) {
    uint64_t bits = 0;
    int i;
#ifdef __SSE2__
    __m128 t = _mm_set1_ps(threshold);
    for (i = 0; i < 64; i += 4) bits |= (uint64_t)_mm_movemask_ps(_mm_cmpge_ps(_mm_loadu_ps(data + i), t)) << i;
#else
    for (i = 0; i < 64; i++) bits |= (uint64_t)(data[i] >= threshold) << i;
#endif
    return bits;
}

/* Pass A over whole blocks: each block's largest key; returns nonzero if any value is NaN. The key
 * is not made per float: as int32 bits, the non-negative floats order like their keys and above
 * every negative one, and the negative ones order by magnitude, so the largest key is the largest
 * bits when any are non-negative, else minus the magnitude of the smallest bits. Three integer
 * operations a vector (maximum, minimum, the magnitudes' maximum for NaN) where keys took six. */
NP_CLONES static int block_keys(const float *values, int64_t num_blocks, int32_t *keys) {
    const int32_t *bits = (const int32_t *)(const void *)values; /* -fno-strict-aliasing */
    int32_t largest_magnitude = 0;
    int64_t b;
    int i;
    for (b = 0; b < num_blocks; b++) {
        const int32_t *block = bits + b * BLOCK;
        int32_t high = INT32_MIN, low = INT32_MAX;
        for (i = 0; i < BLOCK; i++) {
            int32_t raw = block[i], magnitude = raw & 0x7FFFFFFF;
            high = raw > high ? raw : high;
            low = raw < low ? raw : low;
            largest_magnitude = magnitude > largest_magnitude ? magnitude : largest_magnitude;
        }
        keys[b] = high >= 0 ? high : -(low & 0x7FFFFFFF);
    }
    return largest_magnitude > 0x7F800000;
}

/* ---- exp for arguments <= 0 in float64: Cody-Waite reduction and a degree-13 Taylor polynomial,
 * branch-free so that it vectorizes; within 2 ulp of the true value, 0 below -708. ---- */

static inline double exp_nonpositive(double d) {
    const double log2e = 1.4426950408889634, shifter = 6755399441055744.0; /* 1.5 * 2^52 */
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    double clamped = d < -708.0 ? -708.0 : d;
    double t = clamped * log2e + shifter;
    double n = t - shifter;
    double r = (clamped - n * ln2_hi) - n * ln2_lo;
    double p = 1.0 / 6227020800.0;
    uint64_t bits;
    double scale;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits + 1023) << 52; /* 2^n: the low bits of t hold n */
    memcpy(&scale, &bits, sizeof scale);
    return d < -708.0 ? 0.0 : p * scale;
}

/* Pass B over whole blocks (exact, float64): each block's sum of exp(x / temperature - m),
 * accumulated in 16 fixed lanes so that the result does not depend on the vector width. */
NP_CLONES static void exp_block_sums(const float *values, int64_t num_blocks, double temperature, double m,
                                     double *block_sums) {
    int64_t b;
    int i, j;
    for (b = 0; b < num_blocks; b++) {
        const float *block = values + b * BLOCK;
        double lanes[16] = {0}, sum = 0.0;
        for (j = 0; j < BLOCK; j += 16) {
            for (i = 0; i < 16; i++) lanes[i] += exp_nonpositive((double)block[j + i] / temperature - m);
        }
        for (i = 0; i < 16; i++) sum += lanes[i];
        block_sums[b] = sum;
    }
}

/* e = exp(x / temperature - m) for the 128 floats of a block (float64, the same operations as the
 * scalar calls, so the same values), for the candidate scans of blocks where most tokens pass. */
NP_CLONES static void block_exps(const float *block, double temperature, double m, double *e) {
    int i;
    for (i = 0; i < BLOCK; i++) e[i] = exp_nonpositive((double)block[i] / temperature - m);
}

/* Pass F over whole blocks (approximate, float32, about twice as fast as pass B): the sum of 2^a
 * with a = (x - top) * scale <= 0 (scale = log2(e) / temperature), and the sum of 2^a * |a|.
 * Per element, 2^a is within 5e-7 + 1.25e-7 * |a| of exp((x - top) / temperature) relatively (a
 * carries three float roundings; the degree-5 fit of 2^f on [-1/2, 1/2] is within 2.7e-7, 3.5e-7
 * evaluated in float32 with separate roundings, no more with fused ones), and at most 8 float
 * additions per lane before a float64 flush add 5e-7: softmax_sums turns this into a bound. */
/* Pass F's far blocks: a block whose largest float lies TAIL_LOG2 binary orders or more below the
 * top gets a coarse 2^a instead, the float whose bits are (a + 127) * 2^23 (2^n * (1 + f) for
 * a = n + f, f in [0, 1): the chord of 2^f, never below it and at most 1.0615 times it), a third
 * of the operations. Those blocks' sum S goes apart, and the true sum lies in [0.9419 S, 1.0001 S]
 * (a's roundings move 2^a by at most 5e-5 relatively, the float additions by less): softmax_sums
 * counts TAIL_MID * S and adds TAIL_HALF * S to the error. The bench's rows (a broad tail under a
 * few strong candidates, like a language model's) put 78% of their blocks there, and the bound
 * costs nothing near the top; which blocks go where changes no decision, only how often one
 * needs a retry. */
#define TAIL_LOG2 12.0
#define TAIL_MID 0.971
#define TAIL_HALF 0.0291
#define F_LANES 64       /* four vectors in flight at AVX-512: the polynomial's chain is latency-bound */
#define F_FLUSH_ADDS 8   /* float additions per lane between float64 flushes: lanes / 16 blocks apart */
static inline __attribute__((always_inline)) float multiply_add(float a, float b, float c, int fused) {
    return fused ? __builtin_fmaf(a, b, c) : a * b + c;
}

/* The float whose bits are (a + 127) * 2^23 for a = (x - top) * scale clamped to -125, from
 * scale23 = scale * 2^23 (the far blocks' coarse 2^a). */
static inline __attribute__((always_inline)) float coarse_power(float x, float top, float scale23) {
    float a23 = (x - top) * scale23, clamped = a23 < -125.0f * 8388608.0f ? -125.0f * 8388608.0f : a23;
    uint32_t bits = (uint32_t)((int32_t)clamped + (127 << 23));
    float power;
    memcpy(&power, &bits, sizeof power);
    return power;
}

/* Whether blocks with keys below `tail_key` may take the coarse sum: scale * 2^23 must be a float,
 * and |top * scale| below 2^10, so that the AVX2 pass's one rounding of top * scale * 2^23 moves a by
 * at most 2^-14 (2^a by 4.3e-5: within the bound's room). */
static inline int tail_usable(const int32_t *keys, float top, float scale) {
    return keys && scale * 8388608.0f < INFINITY && fabsf(top * scale) < 1024.0f;
}

static inline __attribute__((always_inline)) void approx_sums_body(const float *values, int64_t num_blocks,
                                                                   float top, float scale, const int32_t *skip,
                                                                   const int32_t *keys, int32_t tail_key,
                                                                   double *block_sums, double totals[3], int fused,
                                                                   int lanes) {
    /* Block sums go to block_sums when it is given (a flush per block); the row's totals (sum,
     * weight, far blocks' coarse sum) gather in float64 lanes, so that a caller that needs only Z
     * pays no per-block reduction. Blocks with skip[b] != -1 (those with penalized tokens) are left
     * out; with `keys` (never given with block_sums: a coarse block has no sum of its own), blocks
     * whose key is below tail_key take the coarse sum. Element j of a block
     * goes to lane j % lanes (a constant per variant: the result does not depend on the ISA). */
    const int64_t flush_blocks = F_FLUSH_ADDS * lanes / BLOCK;
    const int use_tail = tail_usable(keys, top, scale);
    const float scale23 = scale * 8388608.0f;
    double sum_lanes[F_LANES] = {0}, weight_lanes[F_LANES] = {0}, tail_total = 0.0;
    float sums[F_LANES] = {0}, weights[F_LANES] = {0};
    int64_t b, pending = 0;
    int i, j;
    for (b = 0; b < num_blocks; b++) {
        const float *block = values + b * BLOCK;
        if (skip && skip[b] != -1) continue;
        if (use_tail && keys[b] < tail_key) {
            float tails[F_LANES] = {0};
            for (j = 0; j < BLOCK; j += lanes) {
                for (i = 0; i < lanes; i++) tails[i] += coarse_power(block[j + i], top, scale23);
            }
            for (i = 0; i < lanes; i++) tail_total += tails[i];
            continue;
        }
        for (j = 0; j < BLOCK; j += lanes) {
            for (i = 0; i < lanes; i++) {
                float a = (block[j + i] - top) * scale;
                float clamped = a < -125.0f ? -125.0f : a;
                float t = clamped + 12582912.0f; /* 1.5 * 2^23: rounds to the nearest integer n */
                float n = t - 12582912.0f, f = clamped - n, p = 1.29156699e-3f, power, v;
                uint32_t bits;
                p = multiply_add(p, f, 9.66853090e-3f, fused);
                p = multiply_add(p, f, 5.55168875e-2f, fused);
                p = multiply_add(p, f, 2.40222648e-1f, fused);
                p = multiply_add(p, f, 6.93146467e-1f, fused);
                p = multiply_add(p, f, 1.0f, fused);
                memcpy(&bits, &t, sizeof bits);
                bits = (bits + 127u) << 23; /* 2^n: the low bits of t hold n */
                memcpy(&power, &bits, sizeof power);
                v = a < -125.0f ? 0.0f : p * power;
                sums[i] += v;
                weights[i] += v * -clamped;
            }
        }
        if (block_sums) {
            double sum = 0.0;
            for (i = 0; i < lanes; i++) sum += sums[i];
            block_sums[b] = sum;
        }
        if (block_sums || ++pending == flush_blocks) {
            pending = 0;
            for (i = 0; i < lanes; i++) {
                sum_lanes[i] += (double)sums[i];
                weight_lanes[i] += (double)weights[i];
                sums[i] = weights[i] = 0.0f;
            }
        }
    }
    totals[0] = totals[1] = 0.0;
    totals[2] = tail_total;
    for (i = 0; i < lanes; i++) {
        totals[0] += sum_lanes[i] + (double)sums[i];
        totals[1] += weight_lanes[i] + (double)weights[i];
    }
}

/* Fused multiply-adds (one rounding each, so within the bound above) where the vector unit has
 * them: about 15% off pass F. Chosen by the caller, because a target clone cannot know its own ISA. */
#ifdef NP_HAVE_CLONES
__attribute__((target("avx512f"))) static void approx_block_sums_fused512(const float *values, int64_t num_blocks,
                                                                          float top, float scale, const int32_t *skip,
                                                                          const int32_t *keys, int32_t tail_key,
                                                                          double *block_sums, double totals[3]) {
    approx_sums_body(values, num_blocks, top, scale, skip, keys, tail_key, block_sums, totals, 1, F_LANES);
}

/* Float lanes into float64 lanes (each float64 addition is within the 1e-12 * Z summation room). */
__attribute__((target("avx2,fma"))) static inline __m256d widened_sum(__m256 lanes) {
    return _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(lanes)), _mm256_cvtps_pd(_mm256_extractf128_ps(lanes, 1)));
}

__attribute__((target("avx2,fma"))) static inline double horizontal_sum(__m256d lanes) {
    __m128d half = _mm_add_pd(_mm256_castpd256_pd128(lanes), _mm256_extractf128_pd(lanes, 1));
    return _mm_cvtsd_f64(_mm_add_sd(half, _mm_unpackhi_pd(half, half)));
}

/* Pass F written out for AVX2 with FMA, the same arithmetic per element as approx_sums_body. Four
 * vectors of eight in flight, stage by stage, so that their chains (about 40 cycles each) overlap.
 * Their values meet in a tree, (v0 + v1) + (v2 + v3), before one accumulator per sum: AVX2's 16
 * registers cannot also hold four accumulators of each (GCC kept them on the stack, and the loads
 * and stores through it cost a third of the pass). The float64 flush comes after every block, so an
 * element sees at most 2 + 4 float additions, within pass F's 8. One difference from the portable
 * body: a below -125 gives 2^-125 rather than 0 (no blend per vector), which softmax_sums' bound covers. */
__attribute__((target("avx2,fma"))) static void approx_block_sums_fused256(const float *values, int64_t num_blocks,
                                                                           float top, float scale, const int32_t *skip,
                                                                           const int32_t *keys, int32_t tail_key,
                                                                           double *block_sums, double totals[3]) {
    const __m256 top8 = _mm256_set1_ps(top), scale8 = _mm256_set1_ps(scale), lowest = _mm256_set1_ps(-125.0f);
    const __m256 round = _mm256_set1_ps(12582912.0f), one = _mm256_set1_ps(1.0f);
    const __m256 c5 = _mm256_set1_ps(1.29156699e-3f), c4 = _mm256_set1_ps(9.66853090e-3f);
    const __m256 c3 = _mm256_set1_ps(5.55168875e-2f), c2 = _mm256_set1_ps(2.40222648e-1f);
    const __m256 c1 = _mm256_set1_ps(6.93146467e-1f);
    const __m256i bias = _mm256_set1_epi32(127);
    const int use_tail = tail_usable(keys, top, scale);
    const __m256 scale23 = _mm256_set1_ps(scale * 8388608.0f), lowest23 = _mm256_set1_ps(-125.0f * 8388608.0f);
    const __m256 shift23 = _mm256_set1_ps(-(top * (scale * 8388608.0f)));
    const __m256i bias23 = _mm256_set1_epi32(127 << 23);
    __m256d sum_lanes = _mm256_setzero_pd(), weight_lanes = _mm256_setzero_pd(), tail_lanes = _mm256_setzero_pd();
    int64_t b;
    int j, k;
    for (b = 0; b < num_blocks; b++) {
        const float *block = values + b * BLOCK;
        __m256 sums = _mm256_setzero_ps(), weights = _mm256_setzero_ps();
        __m256d block_lanes;
        if (skip && skip[b] != -1) continue;
        if (use_tail && keys[b] < tail_key) {
            /* coarse_power, four vectors at a time (x * scale23 - top * scale23 in one rounding where it
             * takes two), their sums meeting in a tree as below. */
            __m256 tails[4];
            for (k = 0; k < 4; k++) tails[k] = _mm256_setzero_ps();
            for (j = 0; j < BLOCK; j += 32) {
                for (k = 0; k < 4; k++) {
                    __m256 a23 = _mm256_fmadd_ps(_mm256_loadu_ps(block + j + 8 * k), scale23, shift23);
                    __m256i bits = _mm256_add_epi32(_mm256_cvttps_epi32(_mm256_max_ps(a23, lowest23)), bias23);
                    tails[k] = _mm256_add_ps(tails[k], _mm256_castsi256_ps(bits));
                }
            }
            tail_lanes = _mm256_add_pd(tail_lanes, widened_sum(_mm256_add_ps(_mm256_add_ps(tails[0], tails[1]),
                                                                              _mm256_add_ps(tails[2], tails[3]))));
            continue;
        }
        for (j = 0; j < BLOCK; j += 32) {
            __m256 clamped[4], t[4], f[4], p[4], v[4];
            for (k = 0; k < 4; k++) {
                __m256 a = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(block + j + 8 * k), top8), scale8);
                clamped[k] = _mm256_max_ps(a, lowest); /* rows with NaN never get here */
            }
            for (k = 0; k < 4; k++) t[k] = _mm256_add_ps(clamped[k], round); /* rounds to the nearest integer n */
            for (k = 0; k < 4; k++) f[k] = _mm256_sub_ps(clamped[k], _mm256_sub_ps(t[k], round));
            for (k = 0; k < 4; k++) p[k] = _mm256_fmadd_ps(c5, f[k], c4);
            for (k = 0; k < 4; k++) p[k] = _mm256_fmadd_ps(p[k], f[k], c3);
            for (k = 0; k < 4; k++) p[k] = _mm256_fmadd_ps(p[k], f[k], c2);
            for (k = 0; k < 4; k++) p[k] = _mm256_fmadd_ps(p[k], f[k], c1);
            for (k = 0; k < 4; k++) p[k] = _mm256_fmadd_ps(p[k], f[k], one);
            for (k = 0; k < 4; k++) {
                __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(t[k]), bias), 23);
                v[k] = _mm256_mul_ps(p[k], _mm256_castsi256_ps(bits));
            }
            sums = _mm256_add_ps(sums, _mm256_add_ps(_mm256_add_ps(v[0], v[1]), _mm256_add_ps(v[2], v[3])));
            /* + v * |a| (clamped <= 0), in two products then one subtraction from the accumulator. */
            weights = _mm256_sub_ps(weights, _mm256_add_ps(_mm256_fmadd_ps(v[1], clamped[1], _mm256_mul_ps(v[0], clamped[0])),
                                                           _mm256_fmadd_ps(v[3], clamped[3], _mm256_mul_ps(v[2], clamped[2]))));
        }
        block_lanes = widened_sum(sums);
        weight_lanes = _mm256_add_pd(weight_lanes, widened_sum(weights));
        if (block_sums) block_sums[b] = horizontal_sum(block_lanes);
        sum_lanes = _mm256_add_pd(sum_lanes, block_lanes);
    }
    totals[0] = horizontal_sum(sum_lanes);
    totals[1] = horizontal_sum(weight_lanes);
    totals[2] = horizontal_sum(tail_lanes);
}
#endif

NP_PLAIN_CLONES static void approx_block_sums_plain(
    const float *values, int64_t num_blocks, float top, float scale, const int32_t *skip, const int32_t *keys,
    int32_t tail_key, double *block_sums, double totals[3]) {
    approx_sums_body(values, num_blocks, top, scale, skip, keys, tail_key, block_sums, totals, 0, F_LANES);
}

static int portable_pass_f = 0;

void np_sampler_portable_pass_f(int portable) { portable_pass_f = portable != 0; }

int np_sampler_pass_f_variant(void) {
#ifdef NP_HAVE_CLONES
    if (!portable_pass_f && __builtin_cpu_supports("avx512f")) return 2;
    if (!portable_pass_f && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 1;
#endif
    return 0;
}

/* Pass F in this machine's variant; totals: sum, weight and the far blocks' coarse sum (see
 * TAIL_LOG2: blocks whose key is below tail_key, when `keys` is given). */
static void approx_block_sums(const float *values, int64_t num_blocks, float top, float scale,
                              const int32_t *skip, const int32_t *keys, int32_t tail_key, double *block_sums,
                              double totals[3]) {
#ifdef NP_HAVE_CLONES
    switch (np_sampler_pass_f_variant()) {
    case 2:
        approx_block_sums_fused512(values, num_blocks, top, scale, skip, keys, tail_key, block_sums, totals);
        return;
    case 1:
        approx_block_sums_fused256(values, num_blocks, top, scale, skip, keys, tail_key, block_sums, totals);
        return;
    default:
        break;
    }
#endif
    approx_block_sums_plain(values, num_blocks, top, scale, skip, keys, tail_key, block_sums, totals);
}

/* The key below which a block is far from `top` (TAIL_LOG2 binary orders of e under it). */
static int32_t tail_key_below(float top, double temperature) {
    return float_key((float)((double)top - TAIL_LOG2 * 0.6931471805599453 * temperature));
}

/* ---- Candidates: (key, value, id), ordered by key descending then id ascending ---- */

typedef struct {
    double key;
    double value;
    int32_t id;
} candidate;

static inline int before(const candidate *a, const candidate *b) {
    return a->key > b->key || (a->key == b->key && a->id < b->id);
}

static void swap(candidate *a, candidate *b) {
    candidate t = *a;
    *a = *b;
    *b = t;
}

static void insertion_sort(candidate *c, int64_t n) {
    int64_t i, j;
    for (i = 1; i < n; i++) {
        candidate item = c[i];
        for (j = i; j > 0 && before(&item, &c[j - 1]); j--) c[j] = c[j - 1];
        c[j] = item;
    }
}

/* Median-of-three Hoare partition; returns the split: c[lo..split] before-or-equal c[split+1..hi]. */
static int64_t partition(candidate *c, int64_t lo, int64_t hi) {
    int64_t mid = lo + (hi - lo) / 2, i = lo - 1, j = hi + 1;
    candidate pivot;
    if (before(&c[mid], &c[lo])) swap(&c[mid], &c[lo]);
    if (before(&c[hi], &c[lo])) swap(&c[hi], &c[lo]);
    if (before(&c[hi], &c[mid])) swap(&c[hi], &c[mid]);
    pivot = c[mid];
    for (;;) {
        do i++; while (before(&c[i], &pivot));
        do j--; while (before(&pivot, &c[j]));
        if (i >= j) return j;
        swap(&c[i], &c[j]);
    }
}

static void sift_down(candidate *c, int64_t root, int64_t n) {
    for (;;) {
        int64_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && before(&c[child], &c[child + 1])) child++;
        if (!before(&c[root], &c[child])) return;
        swap(&c[root], &c[child]);
        root = child;
    }
}

static void heap_sort(candidate *c, int64_t n) {
    int64_t i;
    for (i = n / 2 - 1; i >= 0; i--) sift_down(c, i, n);
    for (i = n - 1; i > 0; i--) {
        swap(&c[0], &c[i]);
        sift_down(c, 0, i);
    }
}

/* Introsort: quicksort that turns to heapsort when it goes too deep, insertion sort when small. */
static void sort_range(candidate *c, int64_t n, int depth) {
    while (n > 16) {
        int64_t split;
        if (depth-- == 0) {
            heap_sort(c, n);
            return;
        }
        split = partition(c, 0, n - 1);
        sort_range(c + split + 1, n - split - 1, depth);
        n = split + 1;
    }
    insertion_sort(c, n);
}

static void sort_candidates(candidate *c, int64_t n) {
    int depth = 2;
    int64_t m;
    for (m = n; m > 1; m >>= 1) depth += 2;
    sort_range(c, n, depth);
}

/* Puts the first k candidates (in order) into c[0..k), in any order; k < n. */
static void select_first(candidate *c, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1, rounds = 0;
    while (hi - lo > 16) {
        int64_t split;
        if (++rounds > 64) break; /* adversarial input: finish with a sort */
        split = partition(c, lo, hi);
        if (split >= k - 1) {
            hi = split;
        } else {
            lo = split + 1;
        }
        if (lo >= k || hi < k - 1) return;
    }
    sort_candidates(c + lo, hi - lo + 1);
}

/* The k-th largest of n keys (1 <= k <= n): a byte-wise radix selection from the top byte down,
 * each round keeping the keys that share the bytes chosen so far (in `scratch`, room for n). No
 * comparison branches: quickselect on a row's few hundred block maxima mispredicted half of its
 * own, and took longer than scanning the blocks it chose. */
static int32_t kth_largest(const int32_t *keys, int64_t n, int64_t k, uint32_t *scratch) {
    int64_t i, m = n;
    int shift;
    for (i = 0; i < n; i++) scratch[i] = (uint32_t)keys[i] ^ 0x80000000u; /* ascending as unsigned */
    for (shift = 24; shift >= 0; shift -= 8) {
        int32_t count[256];
        int64_t above = 0, kept = 0;
        int byte = 255;
        memset(count, 0, sizeof count);
        for (i = 0; i < m; i++) count[(scratch[i] >> shift) & 255]++;
        for (; above + count[byte] < k; byte--) above += count[byte];
        k -= above;
        for (i = 0; i < m; i++) {
            uint32_t key = scratch[i];
            scratch[kept] = key;
            kept += (int)((key >> shift) & 255) == byte;
        }
        m = kept;
    }
    return (int32_t)(scratch[0] ^ 0x80000000u); /* every key left is the k-th largest */
}

/* A key that at least k of the n keys reach (1 <= k <= n), at most 2^16 key steps (a 128th of a
 * binade) below the k-th largest: one pass counting the keys by their top 16 bits' distance under
 * `top` (the largest key), then the buckets from the top down: one pass where kth_largest made
 * four, and a top-k collection at it finds at most a few more tokens; when the k-th largest lies
 * 255 buckets or more below the top, kth_largest itself. */
static int32_t kth_largest_floor(const int32_t *keys, int64_t n, int64_t k, int32_t top, uint32_t *scratch) {
    const uint32_t top_bucket = ((uint32_t)top ^ 0x80000000u) >> 16;
    uint32_t count[256];
    int64_t i, above = 0;
    memset(count, 0, sizeof count);
    for (i = 0; i < n; i++) {
        uint32_t below = top_bucket - (((uint32_t)keys[i] ^ 0x80000000u) >> 16);
        count[below < 255u ? below : 255u]++;
    }
    for (i = 0; i < 255; i++) {
        above += count[i];
        if (above >= k) return (int32_t)(((top_bucket - (uint32_t)i) << 16) ^ 0x80000000u);
    }
    return kth_largest(keys, n, k, scratch);
}

/* ---- Radix sorts for long candidate lists: a top-p cut on a flat row keeps most of the vocabulary,
 * and introsort's comparisons on 24-byte candidates made such a row ~12 ms (7x the Python twin's
 * numpy sort). Stable LSD passes over the bytes of an unsigned rank, skipping bytes every candidate
 * shares; the same order as `before` (ties in key keep their input order, which is id order). ---- */

#define RADIX_MIN 512 /* shorter lists: introsort */
#define SELECT_RANKS 8 /* top-p ranks found by scans before the rest is sorted */
#define DROP_MAX 16 /* candidates past k (or overrides) that drop_last handles; more go to select_first */

/* Ascending rank for `key` descending: the IEEE bits made monotone (-0 as +0; keys are never NaN). */
static inline uint64_t descending_rank(double key) {
    uint64_t bits;
    if (key == 0.0) key = 0.0;
    memcpy(&bits, &key, sizeof bits);
    bits = bits >> 63 ? ~bits : bits | 0x8000000000000000ull;
    return ~bits;
}

static inline uint64_t radix_rank(const candidate *c, int by_id) {
    return by_id ? (uint64_t)(uint32_t)c->id : descending_rank(c->key);
}

/* Stable sort of c[0..n) by rank ascending (id, or key descending), through `scratch` (room for n). */
static void radix_sort(candidate *c, candidate *scratch, int64_t n, int by_id) {
    int64_t counts[8][256]; /* 16 KB on the stack: per call, so samplers on two threads share nothing */
    int bytes = by_id ? 4 : 8, byte, digit;
    candidate *from = c, *to = scratch, *swap_with;
    int64_t i;
    memset(counts, 0, sizeof counts);
    for (i = 0; i < n; i++) {
        uint64_t rank = radix_rank(&c[i], by_id);
        for (byte = 0; byte < bytes; byte++) counts[byte][(rank >> (8 * byte)) & 255]++;
    }
    for (byte = 0; byte < bytes; byte++) {
        int64_t *count = counts[byte], total = 0;
        if (count[(radix_rank(&from[0], by_id) >> (8 * byte)) & 255] == n) continue; /* one digit: nothing moves */
        for (digit = 0; digit < 256; digit++) {
            int64_t here = count[digit];
            count[digit] = total;
            total += here;
        }
        for (i = 0; i < n; i++) to[count[(radix_rank(&from[i], by_id) >> (8 * byte)) & 255]++] = from[i];
        swap_with = from;
        from = to;
        to = swap_with;
    }
    if (from != c) memcpy(c, from, (size_t)n * sizeof(candidate));
}

/* Key descending, id ascending (`before`'s order): the stable radix by key keeps ties in id order, so
 * the candidates are put in id order first unless they are already (collect_above appends the
 * overrides last). */
/* Whether the candidates are in id order already (a scan's are, unless overrides came last). */
static int ids_ascending(const candidate *c, int64_t n) {
    int64_t i;
    for (i = 1; i < n && c[i - 1].id < c[i].id; i++) {
    }
    return i >= n;
}

static void sort_by_key(candidate *c, candidate *scratch, int64_t n) {
    if (n < RADIX_MIN) {
        sort_candidates(c, n);
        return;
    }
    if (!ids_ascending(c, n)) radix_sort(c, scratch, n, 1);
    radix_sort(c, scratch, n, 0);
}

/* Sorts by id ascending (the draw walks tokens in id order). */
static void sort_by_id(candidate *c, candidate *scratch, int64_t n) {
    int64_t i;
    if (n >= RADIX_MIN) {
        radix_sort(c, scratch, n, 1);
        return;
    }
    for (i = 0; i < n; i++) c[i].key = -(double)c[i].id;
    sort_candidates(c, n);
}

/* Sorts a list that is in id order but for a few late arrivals (a scan's tokens, then overrides):
 * insertion, which moves only those few, where sort_by_id would sort all of it again. */
static void sort_by_id_nearly_sorted(candidate *c, int64_t n) {
    int64_t i, j;
    for (i = 1; i < n; i++) {
        candidate item = c[i];
        for (j = i; j > 0 && item.id < c[j - 1].id; j--) c[j] = c[j - 1];
        c[j] = item;
    }
}

/* Removes the `drop` candidates that come last in `before`'s order from c[0..n), keeping the
 * others in their order: a few scans where select_first would scramble the list. */
static void drop_last(candidate *c, int64_t n, int64_t drop) {
    for (; drop > 0; drop--, n--) {
        int64_t worst = 0, i;
        for (i = 1; i < n; i++) worst = before(&c[worst], &c[i]) ? i : worst;
        memmove(c + worst, c + worst + 1, (size_t)(n - worst - 1) * sizeof *c);
    }
}

/* ---- Per-request state ---- */

typedef struct {
    int32_t token;
    int32_t count; /* times drawn (frequency/presence penalties) */
    int32_t seen;  /* in prompt or output (repetition penalty) */
} penalty_entry;

typedef struct {
    int64_t seq_id;
    np_sampling_params params;
    int64_t position;
    int32_t max_token; /* largest token any penalty looks at, -1 if none */
    int track_seen;    /* repetition_penalty != 1 */
    int track_counts;  /* frequency or presence penalty != 0 */
    penalty_entry *entries;
    int64_t num_entries, entries_capacity;
    int32_t *index; /* open addressing: token -> entry + 1, 0 empty; capacity a power of two */
    int64_t index_capacity;
} request;

typedef struct {
    int32_t token;
    int32_t entry; /* its penalty_entry in the request */
    double value;  /* the penalized float64 logit, before temperature */
    double scaled; /* value / temperature, made once (rows with a temperature) */
} override;

struct np_sampler {
    np_idmap slots; /* seq id -> index into requests */
    request *requests;
    int64_t requests_capacity, requests_used;
    int32_t *spare;
    int64_t spare_capacity, num_spare;
    /* per-step and per-row scratch, grown as needed and kept between calls */
    int32_t *row_slots;
    int64_t row_slots_capacity;
    int64_t *tokens;
    int64_t tokens_capacity;
    int32_t *block_key;
    int64_t block_key_capacity;
    int32_t *dirty; /* per block: its masked copy, MARKED (penalized tokens, no copy yet), or -1 */
    int64_t dirty_capacity;
    int32_t *copy_block; /* per copy: its block */
    int64_t copy_block_capacity;
    uint64_t *masked; /* per block, two words: the bits of its penalized tokens */
    int64_t masked_capacity;
    float *copies;
    int64_t copies_capacity;
    override *overrides;
    int64_t overrides_capacity;
    int32_t *copy_key;
    int64_t copy_key_capacity;
    double *block_sum; /* per block: sum of e = exp(x / temperature - m), exact or approximate */
    int64_t block_sum_capacity;
    double *copy_sum;
    int64_t copy_sum_capacity;
    candidate *cands;
    int64_t cands_capacity;
    candidate *cands_scratch; /* the radix sorts' other half */
    int64_t cands_scratch_capacity;
    candidate *cands_bucket; /* the top-p cut's bucket of a long list (top_p_cut_by_buckets) */
    int64_t cands_bucket_capacity;
    int32_t *bucket_count;
    int64_t bucket_count_capacity;
    double *bucket_mass;
    int64_t bucket_mass_capacity;
    int64_t exact_passes;
};

np_sampler *np_sampler_create(void) { return np_calloc(1, sizeof(np_sampler)); }

static void request_release(request *r) {
    np_free(r->entries);
    np_free(r->index);
    memset(r, 0, sizeof *r);
}

void np_sampler_destroy(np_sampler *s) {
    int64_t i;
    if (!s) return;
    for (i = 0; i < s->requests_used; i++) request_release(&s->requests[i]);
    np_free(s->requests);
    np_free(s->spare);
    np_idmap_release(&s->slots);
    np_free(s->row_slots);
    np_free(s->tokens);
    np_free(s->block_key);
    np_free(s->dirty);
    np_free(s->copy_block);
    np_free(s->masked);
    np_free(s->copies);
    np_free(s->overrides);
    np_free(s->copy_key);
    np_free(s->block_sum);
    np_free(s->copy_sum);
    np_free(s->cands);
    np_free(s->cands_scratch);
    np_free(s->cands_bucket);
    np_free(s->bucket_count);
    np_free(s->bucket_mass);
    np_free(s);
}

int64_t np_sampler_num_requests(const np_sampler *s) { return s->slots.size; }

int64_t np_sampler_exact_passes(const np_sampler *s) { return s->exact_passes; }

int64_t np_sampler_position(const np_sampler *s, int64_t seq_id) {
    int32_t slot = np_idmap_get(&s->slots, seq_id);
    return slot < 0 ? -1 : s->requests[slot].position;
}

static uint32_t hash_token(int32_t token) { return (uint32_t)token * 0x9E3779B1u; }

/* The entry of `token` in r's table, made if missing; NULL when out of memory. */
static penalty_entry *entry_for(request *r, int32_t token) {
    uint64_t mask, at;
    int32_t slot;
    if (2 * (r->num_entries + 1) > r->index_capacity) {
        int64_t capacity = r->index_capacity ? 2 * r->index_capacity : 64, i;
        int32_t *index = np_calloc((size_t)capacity, sizeof(int32_t));
        if (!index) return NULL;
        for (i = 0; i < r->num_entries; i++) {
            for (at = hash_token(r->entries[i].token) & (uint64_t)(capacity - 1); index[at];
                 at = (at + 1) & (uint64_t)(capacity - 1)) {
            }
            index[at] = (int32_t)i + 1;
        }
        np_free(r->index);
        r->index = index;
        r->index_capacity = capacity;
    }
    mask = (uint64_t)r->index_capacity - 1;
    for (at = hash_token(token) & mask; (slot = r->index[at]) != 0; at = (at + 1) & mask) {
        if (r->entries[slot - 1].token == token) return &r->entries[slot - 1];
    }
    if (np_reserve(&r->entries, &r->entries_capacity, r->num_entries + 1, sizeof(penalty_entry))) return NULL;
    r->entries[r->num_entries].token = token;
    r->entries[r->num_entries].count = 0;
    r->entries[r->num_entries].seen = 0;
    r->index[at] = (int32_t)(++r->num_entries);
    if (token > r->max_token) r->max_token = token;
    return &r->entries[r->num_entries - 1];
}

static int params_valid(const np_sampling_params *p) {
    return isfinite(p->temperature) && p->temperature >= 0 && p->top_p > 0 && p->top_p <= 1 && p->min_p >= 0 &&
           p->min_p <= 1 && isfinite(p->repetition_penalty) && p->repetition_penalty > 0 &&
           isfinite(p->frequency_penalty) && isfinite(p->presence_penalty) && p->top_k >= 0;
}

/* Registers (or re-registers, like the Python twin) one request with its prompt. */
static int add_request(np_sampler *s, int64_t seq_id, const np_sampling_params *params, const int32_t *prompt,
                       int64_t prompt_length) {
    int32_t slot = np_idmap_get(&s->slots, seq_id);
    request *r;
    int64_t i;
    if (slot < 0) {
        if (s->num_spare > 0) {
            slot = s->spare[s->num_spare - 1];
        } else {
            if (s->requests_used >= INT32_MAX) return NP_ERR_NOMEM;
            if (np_reserve(&s->requests, &s->requests_capacity, s->requests_used + 1, sizeof(request)) ||
                np_reserve(&s->spare, &s->spare_capacity, s->requests_used + 1, sizeof(int32_t)))
                return NP_ERR_NOMEM;
            slot = (int32_t)s->requests_used;
            memset(&s->requests[slot], 0, sizeof(request));
        }
        if (np_idmap_put(&s->slots, seq_id, slot) != NP_OK) return NP_ERR_NOMEM;
        if (s->num_spare > 0 && s->spare[s->num_spare - 1] == slot) {
            s->num_spare--;
        } else {
            s->requests_used++;
        }
    }
    r = &s->requests[slot];
    /* Keep the buffers of a reused slot; forget what they held. */
    r->num_entries = 0;
    if (r->index) memset(r->index, 0, (size_t)r->index_capacity * sizeof(int32_t));
    r->seq_id = seq_id;
    r->params = *params;
    r->position = 0;
    r->max_token = -1;
    r->track_seen = params->repetition_penalty != 1.0;
    r->track_counts = params->frequency_penalty != 0.0 || params->presence_penalty != 0.0;
    if (r->track_seen) {
        for (i = 0; i < prompt_length; i++) {
            penalty_entry *entry = entry_for(r, prompt[i]);
            if (!entry) return NP_ERR_NOMEM;
            entry->seen = 1;
        }
    }
    return NP_OK;
}

static void remove_request(np_sampler *s, int64_t seq_id) {
    int32_t slot = np_idmap_get(&s->slots, seq_id);
    if (slot < 0) return; /* unknown ids are a no-op, as in Python */
    np_idmap_remove(&s->slots, seq_id);
    s->spare[s->num_spare++] = slot; /* room reserved when the slot was made */
}

/* Appends a drawn token to the request's history; NP_ERR_NOMEM if its table cannot grow. */
static int record(request *r, int32_t token) {
    r->position++;
    if (r->track_seen || r->track_counts) {
        penalty_entry *entry = entry_for(r, token);
        if (!entry) return NP_ERR_NOMEM;
        if (r->track_seen) entry->seen = 1;
        if (r->track_counts) entry->count++;
    }
    return NP_OK;
}

static double splitmix64_uniform(uint64_t seed, int64_t position) {
    uint64_t z = seed + ((uint64_t)position + 1) * 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- One row ---- */

typedef struct {
    np_sampler *s;
    const request *r;
    const float *row;
    int64_t vocab;
    int64_t num_blocks;  /* ceil(vocab / BLOCK) */
    int64_t full_blocks; /* blocks wholly inside the row */
    int64_t num_copies;
    int64_t num_overrides;
    int nan_seen;
    /* Pass F made with pass A (fused_pass): its sums over the row's unpenalized full blocks,
     * relative to the float of key fused_top. */
    int fused;
    int coarse_used; /* the last softmax_sums took far blocks' coarse sum */
    int32_t fused_top;
    double fused_sums[2]; /* sum, weight */
} row_view;

#define MARKED (-2) /* s->dirty[b]: the block holds penalized tokens but has no copy yet */

/* The private copy of block b, made on first use: padded with -inf past the vocabulary and
 * -inf at its penalized tokens (which the overrides carry). Most marked blocks are never read
 * again after pass A, so most are never copied. */
static float *block_copy(row_view *v, int64_t b) {
    np_sampler *s = v->s;
    int64_t start = b * BLOCK, count = v->vocab - start < BLOCK ? v->vocab - start : BLOCK, i;
    float *copy;
    int w;
    if (s->dirty[b] >= 0) return s->copies + (int64_t)s->dirty[b] * BLOCK;
    copy = s->copies + v->num_copies * BLOCK; /* room reserved for every block */
    memcpy(copy, v->row + start, (size_t)count * sizeof(float));
    for (i = count; i < BLOCK; i++) copy[i] = -INFINITY;
    for (w = 0; w < BLOCK / 64; w++) {
        uint64_t bits = s->masked[b * (BLOCK / 64) + w];
        for (; bits; bits &= bits - 1) copy[w * 64 + __builtin_ctzll(bits)] = -INFINITY;
    }
    s->dirty[b] = (int32_t)v->num_copies;
    s->copy_block[v->num_copies++] = (int32_t)b;
    return copy;
}

/* Block b as the stage-1 scans must see it: the row, or the masked copy of a marked block. */
static const float *block_data(row_view *v, int64_t b) {
    int32_t state = v->s->dirty[b];
    if (state == MARKED) return block_copy(v, b);
    return state >= 0 ? v->s->copies + (int64_t)state * BLOCK : v->row + b * BLOCK;
}

/* The tokens of block b at or above `threshold`, less the penalized ones (which the overrides
 * carry), as two words of bits; returns the floats they index: the row's, or the block's copy if it
 * has one (the ragged tail's is padded with -inf). */
static const float *block_reaching(const row_view *v, int64_t b, float threshold, uint64_t bits[2]) {
    const np_sampler *s = v->s;
    const float *data = s->dirty[b] >= 0 ? s->copies + (int64_t)s->dirty[b] * BLOCK : v->row + b * BLOCK;
    int w;
    for (w = 0; w < BLOCK / 64; w++) bits[w] = reaching_bits(data + w * 64, threshold) & ~s->masked[b * (BLOCK / 64) + w];
    return data;
}

/* The key of block b's largest float that stage 1 left alone (KEY_NEG_INF if it penalized them
 * all), its penalized places read as -inf: the key a masked copy would have, with no copy made. As
 * in pass A, keys (whose maximum vectorizes) rather than floats, the mask read per lane. */
NP_CLONES static int32_t masked_block_key(const float *values, const uint64_t *masked) {
    const int32_t *bits = (const int32_t *)(const void *)values; /* -fno-strict-aliasing */
    int32_t best = KEY_NEG_INF;
    int w, i;
    for (w = 0; w < BLOCK / 32; w++) {
        const uint32_t word = (uint32_t)(masked[w / 2] >> (32 * (w % 2))); /* 32 bits: a vector shift per lane */
        for (i = 0; i < 32; i++) {
            int32_t raw = bits[w * 32 + i], magnitude = raw & 0x7FFFFFFF;
            int32_t key = raw < 0 ? -magnitude : raw;
            key = (word >> i) & 1 ? KEY_NEG_INF : key;
            best = key > best ? key : best;
        }
    }
    return best;
}

/* Copies of every marked block (the passes over whole rows read the copies, not the row). */
static void copy_marked(row_view *v) {
    int64_t i;
    for (i = 0; i < v->num_overrides; i++) block_copy(v, v->s->overrides[i].token / BLOCK);
}

#define FUSED_CHUNK 32 /* blocks per step of fused_pass: 16 KB, in L1 for pass F after pass A */

/* Pass A with pass F for rows that draw from the whole vocabulary (their draw walks the per-block
 * sums): one read of the row from memory where the two passes made two. Each chunk of blocks gets
 * its keys, then its sums relative to the largest float seen so far (what came before is scaled by
 * exp of the difference, in float64, when that grows), skipping blocks with penalized tokens
 * (their copies are summed later). The per-block sums go to s->block_sum. Top-p rows are not
 * fused: their pass F, knowing the row's top, takes the coarse sum for far blocks (TAIL_LOG2),
 * which more than pays for reading the row again from cache. */
static void fused_pass(row_view *v) {
    np_sampler *s = v->s;
    double temperature = v->r->params.temperature;
    float scale = (float)(1.4426950408889634 / temperature);
    int32_t top = KEY_NEG_INF;
    int64_t c, b;
    v->fused = 1;
    v->fused_sums[0] = v->fused_sums[1] = 0.0;
    v->nan_seen = 0;
    for (c = 0; c < v->full_blocks; c += FUSED_CHUNK) {
        int64_t n = v->full_blocks - c < FUSED_CHUNK ? v->full_blocks - c : FUSED_CHUNK;
        int32_t chunk_top = KEY_NEG_INF;
        double totals[3];
        v->nan_seen |= block_keys(v->row + c * BLOCK, n, s->block_key + c);
        for (b = c; b < c + n; b++) chunk_top = s->block_key[b] > chunk_top ? s->block_key[b] : chunk_top;
        if (chunk_top > top) {
            if (top > KEY_NEG_INF) {
                double factor = exp_nonpositive(((double)key_float(top) - (double)key_float(chunk_top)) / temperature);
                v->fused_sums[0] *= factor;
                v->fused_sums[1] *= factor;
                for (b = 0; b < c; b++) s->block_sum[b] *= factor;
            }
            top = chunk_top;
        }
        if (top == KEY_NEG_INF || top >= KEY_POS_INF) {
            /* Nothing finite yet (every float so far is -inf: they add nothing), or +inf or NaN,
             * which fail the row. */
            for (b = c; b < c + n; b++) s->block_sum[b] = 0.0;
            continue;
        }
        approx_block_sums(v->row + c * BLOCK, n, key_float(top), scale, s->dirty + c, NULL, 0, s->block_sum + c, totals);
        v->fused_sums[0] += totals[0];
        v->fused_sums[1] += totals[1];
    }
    v->fused_top = top;
}

/* x / penalty where x > 0, else x * penalty (the spec's repetition penalty). Both sides are computed
 * and picked through bit masks: the sign is a coin toss per token, and GCC turned the conditional
 * into a branch that mispredicted half the time (a quarter of a penalized row's own work). */
static inline double repetition_penalized(double x, double penalty) {
    double divided = x / penalty, multiplied = x * penalty, picked;
    uint64_t a, b, positive = -(uint64_t)(x > 0);
    memcpy(&a, &divided, sizeof a);
    memcpy(&b, &multiplied, sizeof b);
    a = (a & positive) | (b & ~positive);
    memcpy(&picked, &a, sizeof picked);
    return picked;
}

/* Stage 1 as overrides (their tokens masked in their blocks) and pass A, fused with pass F (and its
 * per-block sums) when `fused` says the row will draw from the whole vocabulary. */
static void prepare_row(row_view *v, int fused) {
    np_sampler *s = v->s;
    const request *r = v->r;
    const np_sampling_params *p = &r->params;
    double penalty = p->repetition_penalty, frequency = p->frequency_penalty, presence = p->presence_penalty;
    double temperature = p->temperature;
    int64_t i;
    v->num_copies = 0;
    v->num_overrides = 0;
    v->fused = 0;
    /* The penalized tokens first (no float read), so that pass F knows which blocks to skip. */
    for (i = 0; i < r->num_entries; i++) {
        const penalty_entry *entry = &r->entries[i];
        int32_t token = entry->token;
        if (!((r->track_seen && entry->seen) || (r->track_counts && entry->count > 0))) continue;
        s->overrides[v->num_overrides].token = token;
        s->overrides[v->num_overrides++].entry = (int32_t)i;
        s->masked[token / 64] |= 1ull << (token % 64);
        s->dirty[token / BLOCK] = MARKED;
    }
    /* Pass A before the penalties' values: it streams the row into cache, where their scattered
     * reads then hit. */
    if (fused && v->full_blocks > 0) {
        fused_pass(v);
    } else {
        v->nan_seen = block_keys(v->row, v->full_blocks, s->block_key);
    }
    for (i = 0; i < v->num_overrides; i++) {
        const penalty_entry *entry = &r->entries[s->overrides[i].entry];
        float raw = v->row[entry->token];
        double x = (double)raw;
        int64_t b = entry->token / BLOCK;
        if (r->track_seen && entry->seen) x = repetition_penalized(x, penalty);
        if (r->track_counts && entry->count > 0) x -= frequency * (double)entry->count + presence;
        s->overrides[i].value = x;
        if (temperature > 0.0) s->overrides[i].scaled = x / temperature;
        v->nan_seen |= x != x;
        /* A block keeps its key unless a penalized token holds it (or ties it): then the key is
         * taken again without the penalized floats (once: the key no longer matches). */
        if (b < v->full_blocks && float_key(raw) == s->block_key[b] && !v->nan_seen)
            s->block_key[b] = masked_block_key(v->row + b * BLOCK, s->masked + b * (BLOCK / 64));
    }
    if (v->full_blocks < v->num_blocks) {
        /* The ragged tail is copied (padded with -inf, penalized places masked) for every pass. */
        v->nan_seen |= block_keys(block_copy(v, v->full_blocks), 1, s->block_key + v->full_blocks);
    }
}

static void finish_row(row_view *v) {
    np_sampler *s = v->s;
    int64_t i;
    for (i = 0; i < v->num_copies; i++) s->dirty[s->copy_block[i]] = -1;
    for (i = 0; i < v->num_overrides; i++) {
        s->dirty[s->overrides[i].token / BLOCK] = -1;
        s->masked[s->overrides[i].token / 64] = 0;
    }
}

static int32_t max_block_key(const row_view *v) {
    int32_t best = INT32_MIN;
    int64_t b;
    for (b = 0; b < v->num_blocks; b++) best = v->s->block_key[b] > best ? v->s->block_key[b] : best;
    return best;
}

/* Stage 2: the largest stage-1 value, lowest id on ties. */
static int64_t pick_greedy(row_view *v) {
    const np_sampler *s = v->s;
    int32_t best_key = max_block_key(v);
    int64_t best_token = -1, b, i;
    double best = -INFINITY;
    if (best_key > KEY_NEG_INF) {
        for (b = 0; s->block_key[b] != best_key; b++) {
        }
        {
            const float *data = block_data(v, b);
            for (i = 0; float_key(data[i]) != best_key; i++) {
            }
            best_token = b * BLOCK + i;
            best = (double)data[i];
        }
    }
    for (i = 0; i < v->num_overrides; i++) {
        const override *o = &s->overrides[i];
        if (o->value > best || (o->value == best && (best_token < 0 || o->token < best_token))) {
            best = o->value;
            best_token = o->token;
        }
    }
    return best == -INFINITY ? 0 : best_token; /* all -inf: every token ties, the lowest id wins */
}

/* Stage 8 on kept candidates sorted by id, whose `value` is p. */
static int64_t draw(const candidate *kept, int64_t n, double u) {
    double total = 0.0, target, cum = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) total += kept[i].value;
    target = u * total;
    for (i = 0; i < n; i++) {
        cum += kept[i].value;
        if (cum > target) return kept[i].id;
    }
    return kept[n - 1].id;
}

#define NEED_MORE (-100) /* internal: the candidates do not reach the top-p cut */
#define AMBIGUOUS (-101) /* internal: the approximate softmax sum cannot settle the top-p cut or the draw */

/* The top 16 bits of p >= 0 as a float64 (sign, exponent, 4 bits of mantissa): larger p, larger
 * prefix; a 16th of a binade per bucket. */
#define CUT_BUCKETS 4096
static inline int64_t p_prefix(double p) {
    uint64_t bits;
    memcpy(&bits, &p, sizeof bits);
    return (int64_t)(bits >> 48);
}

/* Stage 6 on a long candidate list (a flat row keeps thousands) without sorting it: the candidates
 * go to buckets by p_prefix with each bucket's mass; the buckets wholly kept are passed by their
 * mass, and only the bucket where the cut falls (then the next, while rounding leaves the sum short
 * of top_p) is sorted and walked in rank order. The sums come in another order than a walk over
 * all ranks, which the spec allows (a near-tie at most). Returns the number kept, or -1 when the
 * prefixes span more than CUT_BUCKETS (the caller sorts instead); *edge is the last kept in rank
 * order, sums[0] and sums[1] the sums of p before it and after it. */
static int64_t top_p_cut_by_buckets(np_sampler *s, const candidate *c, int64_t n, double top_p, candidate *edge,
                                    double sums[2]) {
    int64_t lowest = INT64_MAX, highest = -1, i, b, kept_above = 0, walked = 0;
    double above = 0.0, last_before = 0.0;
    *edge = c[0];
    for (i = 0; i < n; i++) {
        int64_t prefix = p_prefix(c[i].value);
        lowest = prefix < lowest ? prefix : lowest;
        highest = prefix > highest ? prefix : highest;
    }
    if (highest - lowest >= CUT_BUCKETS) return -1;
    memset(s->bucket_count, 0, (size_t)(highest - lowest + 1) * sizeof(int32_t));
    memset(s->bucket_mass, 0, (size_t)(highest - lowest + 1) * sizeof(double));
    for (i = 0; i < n; i++) {
        int64_t bucket = p_prefix(c[i].value) - lowest;
        s->bucket_count[bucket]++;
        s->bucket_mass[bucket] += c[i].value;
    }
    /* Down from the largest p: a bucket whose mass leaves the sum below top_p is kept whole (and
     * so is the first rank after it). */
    for (b = highest - lowest; b >= 0; b--) {
        if (above + s->bucket_mass[b] >= top_p) break;
        above += s->bucket_mass[b];
        kept_above += s->bucket_count[b];
    }
    if (b < 0) {
        /* Every rank kept: the sum before the last, and the whole sum. */
        int64_t last = 0;
        for (i = 1; i < n; i++) {
            if (c[i].value < c[last].value || (c[i].value == c[last].value && c[i].id > c[last].id)) last = i;
        }
        *edge = c[last];
        sums[0] = above - c[last].value;
        sums[1] = above;
        return n;
    }
    for (; b >= 0; b--) {
        /* The cut's bucket in rank order, walked on from the sum of the buckets above. */
        int64_t m = 0;
        if (s->bucket_count[b] == 0) continue;
        for (i = 0; i < n; i++) {
            if (p_prefix(c[i].value) - lowest != b) continue;
            s->cands_bucket[m] = c[i];
            s->cands_bucket[m++].key = c[i].value;
        }
        sort_by_key(s->cands_bucket, s->cands_scratch, m);
        for (i = 0; i < m; i++) {
            if (!(above < top_p)) break;
            last_before = above;
            above += s->cands_bucket[i].value;
            *edge = s->cands_bucket[i];
            walked++;
        }
        if (i < m || b == 0) break; /* the cut is in this bucket (or every rank is kept) */
    }
    sums[0] = last_before;
    sums[1] = above;
    return kept_above + walked;
}

/* Whether x is kept by a top-p cut whose last kept rank is `edge` (p descending, id ascending). */
static inline int within_cut(const candidate *x, const candidate *edge) {
    return x->value > edge->value || (x->value == edge->value && x->id <= edge->id);
}

/* Stages 6-8 on candidates (any order) whose `value` is p; pmax is the largest p of the softmax.
 * `complete` says the candidates are every token that could be kept; when they are not, and the
 * top-p walk runs out of them before the cut, NEED_MORE asks the caller for more. The p may carry
 * a common relative error up to `error` (an approximate softmax sum): only the top-p cut depends
 * on it (min-p and the draw compare p with p), and AMBIGUOUS says when it could flip the cut. */
static int64_t top_p_min_p_draw(const row_view *v, candidate *c, int64_t n, double pmax, int complete,
                                double error, int *untouched) {
    const np_sampling_params *p = &v->r->params;
    double u = splitmix64_uniform(p->seed, v->r->position);
    int64_t i, kept = n;
    *untouched = 0;
    if (p->top_p < 1.0 && n >= RADIX_MIN) {
        /* A long list: the cut without sorting it, then min-p and the draw on what is kept, in id order. */
        candidate edge;
        double sums[2], floor = p->min_p * pmax;
        int64_t k = 0;
        kept = top_p_cut_by_buckets(v->s, c, n, p->top_p, &edge, sums);
        if (kept >= 0) {
            if (kept == n && !complete && sums[1] < p->top_p) return NEED_MORE;
            if (error > 0.0 && (sums[0] * (1.0 + error) >= p->top_p || (kept < n && sums[1] * (1.0 - error) < p->top_p))) {
                *untouched = 1; /* c as it came: the caller can redo the cut on it */
                return AMBIGUOUS;
            }
            if (!ids_ascending(c, n)) sort_by_id(c, v->s->cands_scratch, n); /* the overrides came last */
            for (i = 0; i < n; i++) {
                if (within_cut(&c[i], &edge) && c[i].value >= floor) c[k++] = c[i];
            }
            return draw(c, k, u);
        }
        kept = n; /* p spread over too many binades for the buckets: sorted below */
    }
    if (p->top_p < 1.0) {
        double sum_before = 0.0, last_kept_before = 0.0;
        int64_t ranked = 0; /* c[0..ranked) holds the first ranks in order */
        for (i = 0; i < n; i++) c[i].key = c[i].value;
        for (i = 0; i < n; i++) {
            if (!(sum_before < p->top_p)) break;
            if (i == ranked && ranked < SELECT_RANKS) {
                /* The next rank by one scan (most cuts keep a few tokens, and a sort of the whole list
                 * cost more than the rest of a top-k row); past SELECT_RANKS, the sort. */
                int64_t best = i, j;
                for (j = i + 1; j < n; j++) best = before(&c[j], &c[best]) ? j : best;
                swap(&c[i], &c[best]);
                ranked++;
            } else if (i == ranked) {
                sort_by_key(c + i, v->s->cands_scratch, n - i); /* p descending, id ascending */
                ranked = n;
            }
            last_kept_before = sum_before;
            sum_before += c[i].value;
        }
        if (i == n && !complete && sum_before < p->top_p) return NEED_MORE;
        if (error > 0.0 && (last_kept_before * (1.0 + error) >= p->top_p ||
                            (i < n && sum_before * (1.0 - error) < p->top_p)))
            return AMBIGUOUS;
        kept = i;
    }
    if (p->min_p > 0.0) {
        double floor = p->min_p * pmax;
        int64_t k = 0;
        for (i = 0; i < kept; i++) {
            if (c[i].value >= floor) c[k++] = c[i];
        }
        kept = k;
    }
    sort_by_id(c, v->s->cands_scratch, kept);
    return draw(c, kept, u);
}

/* Top-k rows: stages 3-8 on the k best tokens. */
static int64_t sample_top_k(row_view *v, double m) {
    int exact_cut;
    np_sampler *s = v->s;
    const np_sampling_params *p = &v->r->params;
    double temperature = p->temperature, z = 0.0, pmax = 0.0;
    int64_t k = p->top_k, n = 0, finite_blocks = 0, late = 0, b, i, j; /* late: overrides appended */
    int32_t threshold = INT32_MAX;
    int collect_all;
    candidate *c = s->cands;
    for (b = 0; b < v->num_blocks; b++) finite_blocks += s->block_key[b] > KEY_NEG_INF;
    collect_all = k > finite_blocks;
    if (!collect_all) {
        /* At least k tokens reach the threshold (k block maxima do), so the k best are all at or above it. */
        threshold = kth_largest_floor(s->block_key, v->num_blocks, k, max_block_key(v), (uint32_t *)s->copy_key);
        {
            /* Dividing by the temperature could merge a float just below the threshold with it (only
             * when x / t underflows or overflows); then take every token instead. */
            float at = key_float(threshold), below = nextafterf(at, -INFINITY);
            if ((double)below / temperature == (double)at / temperature) collect_all = 1;
        }
    }
    if (collect_all) {
        for (i = 0; i < v->vocab; i++) {
            c[i].key = (double)v->row[i] / temperature;
            c[i].id = (int32_t)i;
        }
        for (i = 0; i < v->num_overrides; i++) c[s->overrides[i].token].key = s->overrides[i].scaled;
        n = v->vocab;
    } else {
        float at = key_float(threshold);
        for (b = 0; b < v->num_blocks; b++) {
            uint64_t bits[BLOCK / 64];
            const float *data;
            if (s->block_key[b] < threshold) continue;
            data = block_reaching(v, b, at, bits);
            for (j = 0; j < BLOCK / 64; j++) {
                for (; bits[j]; bits[j] &= bits[j] - 1) {
                    i = j * 64 + __builtin_ctzll(bits[j]);
                    c[n].key = (double)data[i] / temperature;
                    c[n++].id = (int32_t)(b * BLOCK + i);
                }
            }
        }
        {
            /* k tokens reach the threshold already, so an override below it cannot make the k best. */
            double floor = (double)key_float(threshold) / temperature;
            for (i = 0; i < v->num_overrides; i++) {
                double y = s->overrides[i].scaled;
                if (y < floor) continue;
                c[n].key = y;
                c[n++].id = s->overrides[i].token;
                late++;
            }
        }
    }
    if (n - k <= DROP_MAX && late <= DROP_MAX) {
        /* Usually a few more than k reach the threshold: drop those, and the list stays in the
         * scan's id order but for the overrides, last and few (many would make the insertion
         * quadratic: a negative penalty can lift hundreds over the threshold). */
        drop_last(c, n, n - k);
        n = k;
        for (i = 0; i < n; i++) c[i].value = c[i].key;
        sort_by_id_nearly_sorted(c, n);
    } else {
        select_first(c, n, k);
        n = k;
        for (i = 0; i < n; i++) c[i].value = c[i].key;
        sort_by_id(c, s->cands_scratch, n);
    }
    /* Stage 5 in id order: e = exp(x - m), Z summed left to right, p = e / Z. */
    for (i = 0; i < n; i++) {
        c[i].value = exp(c[i].value - m);
        z += c[i].value;
    }
    for (i = 0; i < n; i++) {
        c[i].value /= z;
        pmax = c[i].value > pmax ? c[i].value : pmax;
    }
    return top_p_min_p_draw(v, c, n, pmax, 1, 0.0, &exact_cut);
}

/* Tokens whose e = exp(x / temperature - m) is at least `floor`, as candidates whose `value` is e
 * (exact float64); returns how many, and their summed e in *mass. Found from the raw floats: only
 * blocks whose maximum clears the matching logit threshold (less two floats, for rounding) are read. */
static int64_t collect_above(row_view *v, double m, double floor, double *mass) {
    const np_sampler *s = v->s;
    double temperature = v->r->params.temperature, sum = 0.0;
    candidate *c = s->cands;
    int64_t n = 0, b, i, j;
    if (floor <= 0.0) {
        /* Every token (overridden ones take their stage-1 value): their ids are their places. */
        for (i = 0; i < v->vocab; i++) {
            c[i].value = exp_nonpositive((double)v->row[i] / temperature - m);
            c[i].id = (int32_t)i;
        }
        for (i = 0; i < v->num_overrides; i++) {
            c[s->overrides[i].token].value = exp_nonpositive(s->overrides[i].scaled - m);
        }
        for (i = 0; i < v->vocab; i++) sum += c[i].value;
        *mass = sum;
        return v->vocab;
    }
    {
        float raw = (float)(temperature * (m + log(floor)));
        float at = nextafterf(nextafterf(raw, -INFINITY), -INFINITY);
        int32_t threshold = float_key(at);
        for (b = 0; b < v->num_blocks; b++) {
            uint64_t bits[BLOCK / 64];
            double exps[BLOCK];
            const float *data;
            int dense;
            if (s->block_key[b] < threshold) continue;
            data = block_reaching(v, b, at, bits);
            /* A flat row passes most of a block: then its exps as vectors, the same values. */
            dense = __builtin_popcountll(bits[0]) + __builtin_popcountll(bits[1]) > BLOCK / 4;
            if (dense) block_exps(data, temperature, m, exps);
            for (j = 0; j < BLOCK / 64; j++) {
                for (; bits[j]; bits[j] &= bits[j] - 1) {
                    double e;
                    i = j * 64 + __builtin_ctzll(bits[j]);
                    e = dense ? exps[i] : exp_nonpositive((double)data[i] / temperature - m);
                    if (e < floor) continue;
                    c[n].value = e;
                    c[n++].id = (int32_t)(b * BLOCK + i);
                    sum += e;
                }
            }
        }
    }
    for (i = 0; i < v->num_overrides; i++) {
        double e = exp_nonpositive(s->overrides[i].scaled - m);
        if (e < floor) continue;
        c[n].value = e;
        c[n++].id = s->overrides[i].token;
        sum += e;
    }
    *mass = sum;
    return n;
}

/* How softmax_sums makes Z, cheapest first: pass F with far blocks' coarse sum (TAIL_LOG2), pass F,
 * pass B. A decision the bound leaves open goes to the next level: to SUM_FAST only when the
 * coarse blocks widened the bound (a flatter row, whose cut is often within it), else SUM_EXACT. */
enum { SUM_COARSE, SUM_FAST, SUM_EXACT };

/* The softmax sum Z = sum of exp(x / temperature - m), exact (pass B) or approximate (pass F) with
 * *error bounding |result - Z|; with `per_block`, its parts per block in block_sum as well (and no
 * coarse blocks). Sets v->coarse_used. */
static double softmax_sums(row_view *v, double m, int level, int per_block, double *error) {
    np_sampler *s = v->s;
    double temperature = v->r->params.temperature, z = 0.0, weight = 0.0, tail = 0.0, factor = 0.0;
    int32_t top_key = max_block_key(v);
    int64_t b, i;
    int exact = level == SUM_EXACT;
    per_block |= exact;
    copy_marked(v);
    if (exact) {
        exp_block_sums(v->row, v->full_blocks, temperature, m, s->block_sum);
        exp_block_sums(s->copies, v->num_copies, temperature, m, s->copy_sum);
        for (i = 0; i < v->num_copies; i++) s->block_sum[s->copy_block[i]] = s->copy_sum[i];
    } else if (top_key > KEY_NEG_INF) {
        /* Relative to the largest float, then scaled to m (which an override may exceed). */
        float top, scale = (float)(1.4426950408889634 / temperature);
        double row_totals[3], copy_totals[3];
        if (v->fused) {
            /* The row's sums are made (fused_pass); only the ragged tail can beat their top. */
            double shift = 1.0;
            if (top_key > v->fused_top) {
                shift = v->fused_top > KEY_NEG_INF
                            ? exp_nonpositive(((double)key_float(v->fused_top) - (double)key_float(top_key)) / temperature)
                            : 0.0;
            } else {
                top_key = v->fused_top;
            }
            row_totals[0] = v->fused_sums[0] * shift;
            row_totals[1] = v->fused_sums[1] * shift;
            row_totals[2] = 0.0; /* the fused pass keeps per-block sums: no coarse blocks */
            for (b = 0; per_block && shift != 1.0 && b < v->full_blocks; b++) s->block_sum[b] *= shift;
            v->fused = 0; /* used: an exact retry recomputes everything */
            top = key_float(top_key);
        } else {
            top = key_float(top_key);
            approx_block_sums(v->row, v->full_blocks, top, scale, s->dirty,
                              level == SUM_COARSE && !per_block ? s->block_key : NULL, tail_key_below(top, temperature),
                              per_block ? s->block_sum : NULL, row_totals);
        }
        approx_block_sums(s->copies, v->num_copies, top, scale, NULL, NULL, 0, per_block ? s->copy_sum : NULL,
                          copy_totals);
        /* The fused top can pass m when a penalty lowered the largest float. */
        double lift = (double)top / temperature - m;
        if (lift > 700.0) {
            /* exp(lift) would overflow (a penalty over a tiny temperature: found by the fuzzer, T = 1e-30
             * and a frequency penalty gave Z = inf * 0): the exact sums, relative to m itself. */
            return softmax_sums(v, m, SUM_EXACT, per_block, error);
        }
        factor = lift > 0.0 ? exp(lift) : exp_nonpositive(lift);
        tail = factor * row_totals[2];
        z = factor * (row_totals[0] + copy_totals[0]) + TAIL_MID * tail;
        weight = row_totals[1] + copy_totals[1];
        if (per_block) {
            for (i = 0; i < v->num_copies; i++) s->block_sum[s->copy_block[i]] = s->copy_sum[i];
            for (b = 0; b < v->num_blocks; b++) s->block_sum[b] *= factor;
        }
    } else if (per_block) {
        for (b = 0; b < v->num_blocks; b++) s->block_sum[b] = 0.0; /* every float is -inf */
    }
    for (i = 0; i < v->num_overrides; i++) {
        const override *o = &s->overrides[i];
        double e = exp_nonpositive(o->scaled - m);
        if (per_block) s->block_sum[o->token / BLOCK] += e;
        if (!exact) z += e;
    }
    if (exact) {
        for (b = 0; b < v->num_blocks; b++) z += s->block_sum[b];
    }
    v->coarse_used = tail > 0.0;
    /* Twice the worst case of pass F's error terms, plus room for any float64 summation order, plus
     * 2^-124 per element for the AVX2 pass F's 2^-125 where a is below -125, plus the far blocks'
     * coarse sum's half-width (already whole: its bound holds for any a). */
    *error = exact ? 0.0
                   : 2.0 * (1e-6 * z + 1.25e-7 * factor * weight) + 1e-12 * z + TAIL_HALF * tail +
                         factor * (double)((v->num_blocks + v->num_copies) * BLOCK) * 0x1p-124 + 1e-300;
    return z;
}

/* The level after `level` for a decision its bound left open. */
static int next_level(const row_view *v, int level) {
    return level == SUM_COARSE && v->coarse_used ? SUM_FAST : SUM_EXACT;
}

/* Stage 8 over the whole vocabulary (no top-p, no min-p): the block where u * Z lands, then the token. */
static int64_t draw_from_all(row_view *v, double m, double z, double error) {
    const np_sampler *s = v->s;
    double temperature = v->r->params.temperature;
    double target = splitmix64_uniform(v->r->params.seed, v->r->position) * z, cum = 0.0, before;
    double e[BLOCK];
    int64_t b, i, k;
    for (b = 0; b < v->num_blocks - 1; b++) {
        if (cum + s->block_sum[b] > target) break;
        cum += s->block_sum[b];
    }
    for (; b < v->num_blocks; b++) {
        const float *data = block_data(v, b);
        for (i = 0; i < BLOCK; i++) e[i] = exp_nonpositive((double)data[i] / temperature - m);
        for (k = 0; k < v->num_overrides; k++) {
            const override *o = &s->overrides[k];
            if (o->token / BLOCK == b) e[o->token % BLOCK] = exp_nonpositive(o->scaled - m);
        }
        for (i = 0; i < BLOCK && b * BLOCK + i < v->vocab; i++) {
            before = cum;
            cum += e[i];
            if (cum > target) {
                /* Both comparisons that chose this token must hold whatever the error of z. */
                if (cum - target <= 2.0 * error || target - before < 2.0 * error) return AMBIGUOUS;
                return b * BLOCK + i;
            }
        }
    }
    return target - cum < 2.0 * error ? AMBIGUOUS : v->vocab - 1;
}

/* Stages 6-8 with top-p over the whole vocabulary: collect tokens above a falling floor until they
 * carry top_p of the mass, then cut, min-p and draw on those. */
static int64_t draw_nucleus(row_view *v, double m, double z, double error, int *level) {
    static const double floors[] = {0.5, 0.25, 0x1p-4, 0x1p-8, 0x1p-16, 0x1p-32, 0x1p-64, 0.0};
    np_sampler *s = v->s;
    const np_sampling_params *p = &v->r->params;
    /* Below min_floor nothing survives min-p (p >= min_p * max p, and max p is 1 / Z), so a floor
     * there loses no kept token; the exact test is made on p afterwards. */
    double min_floor = p->min_p > 0.0 ? p->min_p * (1.0 - 0x1p-40) : 0.0;
    size_t step;
    for (step = 0; step < sizeof floors / sizeof floors[0]; step++) {
        double floor = floors[step] > min_floor ? floors[step] : min_floor, mass;
        int complete = floor == 0.0 || floor == min_floor;
        int64_t n = collect_above(v, m, floor, &mass), i, picked;
        int untouched;
        if (!complete && mass < p->top_p * (z + error) * (1.0 + 1e-9)) continue; /* the cut lies below */
        for (i = 0; i < n; i++) {
            s->cands[i].key = s->cands[i].value; /* e, kept for a redo */
            s->cands[i].value /= z;
        }
        picked = top_p_min_p_draw(v, s->cands, n, 1.0 / z, complete, error / z, &untouched);
        while (picked == AMBIGUOUS && untouched && *level != SUM_EXACT) {
            /* The bound could flip the cut: Z at the next level (the exact one last), then the cut
             * again on the same candidates, where the caller's redo would collect them all again. */
            *level = next_level(v, *level);
            z = softmax_sums(v, m, *level, 0, &error);
            s->exact_passes += *level == SUM_EXACT;
            for (i = 0; i < n; i++) s->cands[i].value = s->cands[i].key / z;
            picked = top_p_min_p_draw(v, s->cands, n, 1.0 / z, complete, error / z, &untouched);
        }
        if (picked != NEED_MORE) return picked;
    }
    return NEED_MORE; /* unreachable: the last floor takes every token */
}

/* Rows without top-k: stages 3 and 5-8 over the whole vocabulary. */
static int64_t sample_full(row_view *v, double m) {
    const np_sampling_params *p = &v->r->params;
    int level = SUM_COARSE;
    if (p->top_p == 1.0 && p->min_p > 0.0) {
        /* Min-p alone never needs Z: p >= min_p * max p is e >= min_p, and the draw is scale-free. */
        double mass;
        int64_t n = collect_above(v, m, p->min_p * (1.0 - 0x1p-40), &mass);
        int untouched;
        return top_p_min_p_draw(v, v->s->cands, n, 1.0, 1, 0.0, &untouched);
    }
    /* First with the cheapest approximate Z; only when that could flip a decision, again more exactly. */
    for (;;) {
        double error, z = softmax_sums(v, m, level, p->top_p == 1.0, &error);
        v->s->exact_passes += level == SUM_EXACT;
        int64_t picked = p->top_p < 1.0 ? draw_nucleus(v, m, z, error, &level) : draw_from_all(v, m, z, error);
        if (picked >= 0) return picked;
        if (level == SUM_EXACT) return v->vocab - 1; /* unreachable: the exact pass is never ambiguous */
        level = next_level(v, level);
    }
}

/* Stages 1-8 for one row; NP_OK with *token, or NP_ERR_NONFINITE. */
static int sample_row(np_sampler *s, const request *r, const float *row, int64_t vocab, int64_t *token) {
    row_view v;
    int status = NP_OK;
    v.s = s;
    v.r = r;
    v.row = row;
    v.vocab = vocab;
    v.num_blocks = (vocab + BLOCK - 1) / BLOCK;
    v.full_blocks = vocab / BLOCK;
    {
        /* Rows that draw from the whole vocabulary (no top-k, top-p or min-p) get pass F with pass A
         * and its per-block sums; top-p rows take pass F later, once pass A has found the top. */
        const np_sampling_params *p = &r->params;
        int draws_from_all = p->temperature > 0.0 && !(p->top_k > 0 && p->top_k < vocab) && p->top_p == 1.0 &&
                             !(p->min_p > 0.0);
        prepare_row(&v, draws_from_all);
    }
    if (v.nan_seen) {
        status = NP_ERR_NONFINITE;
    } else if (r->params.temperature == 0.0) {
        *token = pick_greedy(&v);
    } else {
        double temperature = r->params.temperature, m;
        int32_t best_key = max_block_key(&v);
        int64_t i;
        m = best_key > KEY_NEG_INF ? (double)key_float(best_key) / temperature : -INFINITY;
        for (i = 0; i < v.num_overrides; i++) {
            double y = s->overrides[i].scaled;
            m = y > m ? y : m;
        }
        if (!isfinite(m)) {
            status = NP_ERR_NONFINITE; /* +inf, or every token -inf: the softmax is undefined */
        } else if (r->params.top_k > 0 && r->params.top_k < vocab) {
            *token = sample_top_k(&v, m);
        } else {
            *token = sample_full(&v, m);
        }
    }
    finish_row(&v);
    return status;
}

/* ---- The step ---- */

/* Grows every per-row buffer for rows of `vocab` tokens with up to `max_overrides` penalized ones. */
static int reserve_scratch(np_sampler *s, int64_t vocab, int64_t max_overrides) {
    int64_t blocks = (vocab + BLOCK - 1) / BLOCK, old = s->dirty_capacity, old_masked = s->masked_capacity, i;
    int64_t cands = (vocab > blocks ? vocab : blocks) + max_overrides;
    if (np_reserve(&s->block_key, &s->block_key_capacity, blocks, sizeof(int32_t)) ||
        np_reserve(&s->masked, &s->masked_capacity, blocks * (BLOCK / 64), sizeof(uint64_t)) ||
        np_reserve(&s->dirty, &s->dirty_capacity, blocks, sizeof(int32_t)) ||
        np_reserve(&s->copy_block, &s->copy_block_capacity, blocks, sizeof(int32_t)) ||
        np_reserve(&s->copies, &s->copies_capacity, blocks * BLOCK, sizeof(float)) ||
        np_reserve(&s->overrides, &s->overrides_capacity, max_overrides, sizeof(override)) ||
        np_reserve(&s->copy_key, &s->copy_key_capacity, blocks, sizeof(int32_t)) ||
        np_reserve(&s->block_sum, &s->block_sum_capacity, blocks, sizeof(double)) ||
        np_reserve(&s->copy_sum, &s->copy_sum_capacity, blocks, sizeof(double)) ||
        np_reserve(&s->cands, &s->cands_capacity, cands, sizeof(candidate)) ||
        np_reserve(&s->cands_scratch, &s->cands_scratch_capacity, cands, sizeof(candidate)) ||
        np_reserve(&s->cands_bucket, &s->cands_bucket_capacity, cands, sizeof(candidate)) ||
        np_reserve(&s->bucket_count, &s->bucket_count_capacity, CUT_BUCKETS, sizeof(int32_t)) ||
        np_reserve(&s->bucket_mass, &s->bucket_mass_capacity, CUT_BUCKETS, sizeof(double)))
        return NP_ERR_NOMEM;
    for (i = old; i < s->dirty_capacity; i++) s->dirty[i] = -1;
    for (i = old_masked; i < s->masked_capacity; i++) s->masked[i] = 0; /* finish_row clears the rest */
    return NP_OK;
}

int np_sampler_step(np_sampler *s, const int64_t *remove_ids, int64_t n_remove, const int64_t *add_ids,
                    const np_sampling_params *add_params, const int64_t *add_prompt_offsets,
                    const int32_t *add_prompt_tokens, int64_t n_add, const float *logits, int64_t rows,
                    int64_t vocab, const int64_t *seq_ids, int64_t *out_tokens, int64_t *bad_index) {
    int64_t i, max_overrides = 0;
    int status;
    *bad_index = -1;
    if (n_remove < 0 || n_add < 0 || rows < 0 || (rows > 0 && (vocab < 1 || vocab > INT32_MAX - BLOCK)))
        return NP_ERR_ARG;
    /* Check every registration before changing anything. */
    for (i = 0; i < n_add; i++) {
        int64_t t;
        if (!params_valid(&add_params[i]) || add_prompt_offsets[i] < 0 ||
            add_prompt_offsets[i + 1] < add_prompt_offsets[i]) {
            *bad_index = i;
            return NP_ERR_ARG;
        }
        for (t = add_prompt_offsets[i]; t < add_prompt_offsets[i + 1]; t++) {
            if (add_prompt_tokens[t] < 0) {
                *bad_index = i;
                return NP_ERR_TOKEN_RANGE;
            }
        }
    }
    for (i = 0; i < n_remove; i++) remove_request(s, remove_ids[i]);
    for (i = 0; i < n_add; i++) {
        /* The adapter sends no buffer when no prompt tokens travel (repetition penalty 1): no NULL + 0. */
        const int32_t *prompt = add_prompt_tokens ? add_prompt_tokens + add_prompt_offsets[i] : NULL;
        status = add_request(s, add_ids[i], &add_params[i], prompt, add_prompt_offsets[i + 1] - add_prompt_offsets[i]);
        if (status != NP_OK) {
            *bad_index = i;
            return status;
        }
    }
    if (rows == 0) return NP_OK;
    if (np_reserve(&s->row_slots, &s->row_slots_capacity, rows, sizeof(int32_t)) ||
        np_reserve(&s->tokens, &s->tokens_capacity, rows, sizeof(int64_t)))
        return NP_ERR_NOMEM;
    for (i = 0; i < rows; i++) {
        int32_t slot = np_idmap_get(&s->slots, seq_ids[i]);
        const request *r;
        if (slot < 0) {
            *bad_index = i;
            return NP_ERR_UNKNOWN_SEQ;
        }
        r = &s->requests[slot];
        if (r->max_token >= vocab) {
            *bad_index = i;
            return NP_ERR_TOKEN_RANGE;
        }
        s->row_slots[i] = slot;
        max_overrides = r->num_entries > max_overrides ? r->num_entries : max_overrides;
    }
    if (reserve_scratch(s, vocab, max_overrides) != NP_OK) return NP_ERR_NOMEM;
    /* Draw every row before recording any token, so that a failed row leaves no history changed. */
    for (i = 0; i < rows; i++) {
        status = sample_row(s, &s->requests[s->row_slots[i]], logits + i * vocab, vocab, &s->tokens[i]);
        if (status != NP_OK) {
            *bad_index = i;
            return status;
        }
    }
    for (i = 0; i < rows; i++) {
        if (record(&s->requests[s->row_slots[i]], (int32_t)s->tokens[i]) != NP_OK) return NP_ERR_NOMEM;
        out_tokens[i] = s->tokens[i];
    }
    return NP_OK;
}

/* ---- Rows drawn for another engine (vLLM's CPU sampler swapped for this one) ---- */

int np_sampler_draw_rows(np_sampler *s, const float *logits, int64_t rows, int64_t vocab, const int32_t *top_k,
                         const float *top_p, const int64_t *seeds, int64_t *out_tokens, int64_t *bad_index) {
    int64_t i;
    int status;
    request r;
    *bad_index = -1;
    if (rows < 0 || (rows > 0 && (vocab < 1 || vocab > INT32_MAX - BLOCK))) return NP_ERR_ARG;
    if (rows == 0) return NP_OK;
    /* Check every row's settings before drawing any: a refusal leaves out_tokens untouched. */
    for (i = 0; i < rows; i++) {
        double p = top_p ? (double)top_p[i] : 1.0;
        if ((top_k && top_k[i] < 0) || !(p > 0.0 && p <= 1.0)) {
            *bad_index = i;
            return NP_ERR_ARG;
        }
    }
    if (reserve_scratch(s, vocab, 0) != NP_OK) return NP_ERR_NOMEM;
    memset(&r, 0, sizeof r);
    r.params.temperature = 1.0; /* the caller divided the logits by each row's temperature already */
    r.params.repetition_penalty = 1.0;
    r.max_token = -1;
    for (i = 0; i < rows; i++) {
        r.params.top_k = top_k ? (int64_t)top_k[i] : 0;
        r.params.top_p = top_p ? (double)top_p[i] : 1.0;
        r.params.seed = (uint64_t)seeds[i];
        status = sample_row(s, &r, logits + i * vocab, vocab, &out_tokens[i]);
        if (status != NP_OK) {
            *bad_index = i;
            return status;
        }
    }
    return NP_OK;
}
