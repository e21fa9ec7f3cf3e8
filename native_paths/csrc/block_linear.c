/* Linear layers over block-quantized weights in llama.cpp's numbers, for the engine's small decode batches:
 * 4 bits (Q4_1: a scale and a minimum per 32 weights) for the layers, 8 bits (Q8_0: a scale per 32)
 * for the output head, whose logits 4 bits moved too far.
 *
 * Decode at batch 1 reads every weight once per token, so its time is the weights' bytes over the
 * memory's read rate; Q4_1 holds a weight in 5 bits, against 8 for torch's int8 linears. The
 * activations are quantized per call to 8 bits per block of 32 (a scale and the block's sum, as
 * llama.cpp's Q8_1 does), so a block's dot product is integer arithmetic and two float multiplies:
 *     sum_j (dw*qw_j + mw) * (dx*qx_j) = dw*dx * sum_j qw_j*qx_j + mw * (dx * sum_j qx_j)
 * (mw = 0 for 8 bits). Output rows are split between torch's own OpenMP threads (parallel.c). The
 * Python twin (engine/blockquant.py) computes the same
 * sums in torch. */
#include "native_paths.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NP_BL_X86 1
#endif

#define QK 32 /* weights per block */
#define GROUP 4 /* output rows packed together */

/* One block of 32 weights in each of four consecutive output rows: their float16 scales and minimums,
 * then each row's 16 bytes of nibbles (weights 0-15 in the low nibbles, 16-31 in the high ones, as in
 * llama.cpp's Q4_1). A matrix is its groups of four rows, each group its blocks in order, read front
 * to back: 80 bytes per 128 weights. */
typedef struct {
    uint16_t d[GROUP], m[GROUP];
    uint8_t qs[GROUP][QK / 2];
} q4_group;

/* The 8-bit twin of q4_group: four float16 scales, then each row's 32 signed bytes (w = d * q). */
typedef struct {
    uint16_t d[GROUP];
    int8_t qs[GROUP][QK];
} q8_group;

static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff, bits;
    if (exponent == 0) {
        if (mantissa == 0) {
            bits = sign;
        } else { /* subnormal: normalise it */
            exponent = 127 - 15 + 1;
            while (!(mantissa & 0x400)) {
                mantissa <<= 1;
                exponent--;
            }
            bits = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
        }
    } else if (exponent == 31) {
        bits = sign | 0x7f800000 | (mantissa << 13);
    } else {
        bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
    }
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* One row of `in` activations as 8-bit blocks of 32: q[nb * 32] (a last partial block padded with zeros),
 * and per block its scale and scale * sum(q). */
static void quantize_row(const float *x, int64_t in, int8_t *q, float *scale, float *scaled_sum) {
    for (int64_t k = 0; k * QK < in; k++) {
        const float *xb = x + k * QK;
        int n = in - k * QK < QK ? (int)(in - k * QK) : QK;
        float amax = 0.0f;
        for (int j = 0; j < n; j++) {
            float a = fabsf(xb[j]);
            amax = a > amax ? a : amax;
        }
        float d = amax / 127.0f, inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < QK; j++) {
            /* nearbyintf rounds half to even, as torch.round in the Python twin does */
            int v = j < n ? (int)nearbyintf(xb[j] * inverse) : 0;
            q[k * QK + j] = (int8_t)v;
            sum += v;
        }
        scale[k] = d;
        scaled_sum[k] = d * (float)sum;
    }
}

/* The four weight rows of a group against `R` activation rows (q: R rows of nb * 32, scale and ssum: R
 * rows of nb); y[r * 4 + i] for activation row r and weight row i. `g` is the group's first block. */
typedef void (*group_fn)(const void *, int64_t, const int8_t *, const float *, const float *, float *);

/* How far ahead of the block being read the vector loops ask for the weights: with the hardware
 * prefetcher alone a thread read far below the memory's rate (docs/measurements.md has the figures). */
#define PREFETCH_BYTES 2048
#define CHUNK 4 /* activation rows the vector kernels take at once (8 bits: AVX-512 VNNI only) */

static void q4_scalar(const void *group, int64_t nb, const int8_t *q, const float *scale, const float *ssum,
                      float *y) {
    const q4_group *g = group;
    for (int i = 0; i < GROUP; i++) {
        float total = 0.0f;
        for (int64_t k = 0; k < nb; k++) {
            int isum = 0;
            for (int j = 0; j < QK / 2; j++) {
                isum += (g[k].qs[i][j] & 0x0f) * q[k * QK + j] + (g[k].qs[i][j] >> 4) * q[k * QK + j + QK / 2];
            }
            total += half_to_float(g[k].d[i]) * scale[k] * (float)isum + half_to_float(g[k].m[i]) * ssum[k];
        }
        y[i] = total;
    }
}

static void q8_scalar(const void *group, int64_t nb, const int8_t *q, const float *scale, const float *ssum,
                      float *y) {
    const q8_group *g = group;
    (void)ssum;
    for (int i = 0; i < GROUP; i++) {
        float total = 0.0f;
        for (int64_t k = 0; k < nb; k++) {
            int isum = 0;
            for (int j = 0; j < QK; j++) {
                isum += g[k].qs[i][j] * q[k * QK + j];
            }
            total += half_to_float(g[k].d[i]) * scale[k] * (float)isum;
        }
        y[i] = total;
    }
}

#ifdef NP_BL_X86
/* A 4-bit loop's step k: block b of the group, its weights asked for ahead, and its four scales and
 * minimums as floats (dm: d0-d3 then m0-m3; m: the minimums). */
#define NP_Q4_BLOCK_SCALES                                                                                \
    const q4_group *b = g + k;                                                                            \
    _mm_prefetch((const char *)b + PREFETCH_BYTES, _MM_HINT_T0);                                          \
    __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b->d));                                  \
    __m128 m = _mm256_extractf128_ps(dm, 1);

#define NP_AVX2 "avx2,fma,f16c"

__attribute__((target(NP_AVX2))) static inline float sum_of_8(__m256 v) {
    __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    half = _mm_add_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_add_ss(half, _mm_movehdup_ps(half)));
}

/* AVX2, 4 bits: maddubs adds unsigned-times-signed byte products pairwise into int16, where two 4-bit
 * products (at most 2 * 15 * 128 each) still fit when added; madd then sums pairs into int32 lanes. */
#define NP_MADDUBS(u1, s1, u2, s2)                                                                        \
    _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(u1, s1), _mm256_maddubs_epi16(u2, s2)),      \
                      _mm256_set1_epi16(1))

/* 4 bits: weight rows 0-1 and 2-3 of a group each fill one 256-bit register: the low 128 bits hold the
 * first row's nibbles, the high 128 the second's, against a block of activations broadcast to both
 * halves, so that a product gives 4 int32 lanes per weight row. The nibbles are unpacked once per
 * block and used for all R activation rows. */
#define NP_Q4_BODY(R)                                                                                    \
    const q4_group *g = group;                                                                           \
    const __m256i low = _mm256_set1_epi8(0x0f);                                                          \
    const __m256i rows01 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);                                    \
    const __m256i rows23 = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);                                    \
    __m256 acc01[R], acc23[R];                                                                            \
    __m128 minimums[R];                                                                                   \
    for (int r = 0; r < R; r++) {                                                                         \
        acc01[r] = acc23[r] = _mm256_setzero_ps();                                                        \
        minimums[r] = _mm_setzero_ps();                                                                   \
    }                                                                                                     \
    for (int64_t k = 0; k < nb; k++) {                                                                    \
        NP_Q4_BLOCK_SCALES                                                                                \
        __m256i w01 = _mm256_loadu_si256((const __m256i *)b->qs[0]);                                      \
        __m256i w23 = _mm256_loadu_si256((const __m256i *)b->qs[2]);                                      \
        __m256i lo01 = _mm256_and_si256(w01, low), hi01 = _mm256_and_si256(_mm256_srli_epi16(w01, 4), low); \
        __m256i lo23 = _mm256_and_si256(w23, low), hi23 = _mm256_and_si256(_mm256_srli_epi16(w23, 4), low); \
        for (int r = 0; r < R; r++) {                                                                     \
            const int8_t *qb = q + (r * nb + k) * QK;                                                     \
            __m256i xlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qb));              \
            __m256i xhi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(qb + 16)));       \
            __m256 scaled = _mm256_mul_ps(dm, _mm256_set1_ps(scale[r * nb + k]));                         \
            minimums[r] = _mm_fmadd_ps(m, _mm_set1_ps(ssum[r * nb + k]), minimums[r]);                    \
            __m256i p01 = NP_MADDUBS(lo01, xlo, hi01, xhi);                                               \
            __m256i p23 = NP_MADDUBS(lo23, xlo, hi23, xhi);                                               \
            acc01[r] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(scaled, rows01), _mm256_cvtepi32_ps(p01), \
                                       acc01[r]);                                                         \
            acc23[r] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(scaled, rows23), _mm256_cvtepi32_ps(p23), \
                                       acc23[r]);                                                         \
        }                                                                                                 \
    }                                                                                                     \
    for (int r = 0; r < R; r++) {                                                                         \
        /* lanes 0 and 4 of the double hadd: weight rows 0 and 1; lanes 1 and 5: rows 2 and 3 */         \
        __m256 sums = _mm256_hadd_ps(acc01[r], acc23[r]);                                                 \
        sums = _mm256_hadd_ps(sums, sums);                                                                \
        float lanes[8], mins[4];                                                                          \
        _mm256_storeu_ps(lanes, sums);                                                                    \
        _mm_storeu_ps(mins, minimums[r]);                                                                 \
        y[r * GROUP + 0] = lanes[0] + mins[0];                                                            \
        y[r * GROUP + 1] = lanes[4] + mins[1];                                                            \
        y[r * GROUP + 2] = lanes[1] + mins[2];                                                            \
        y[r * GROUP + 3] = lanes[5] + mins[3];                                                            \
    }

/* AVX2, 8 bits, one activation row: each weight row's 32 bytes against the block's 32 activations. Signed
 * times signed goes through maddubs's unsigned-times-signed products as |w| times x with w's sign; a
 * pair of them (at most 2 * 127 * 127) fits int16. */
#define NP_Q8_BODY                                                                                       \
    const q8_group *g = group;                                                                           \
    __m256 acc[GROUP];                                                                                    \
    (void)ssum;                                                                                           \
    for (int i = 0; i < GROUP; i++) {                                                                     \
        acc[i] = _mm256_setzero_ps();                                                                     \
    }                                                                                                     \
    for (int64_t k = 0; k < nb; k++) {                                                                    \
        const q8_group *b = g + k;                                                                        \
        _mm_prefetch((const char *)b + PREFETCH_BYTES, _MM_HINT_T0);                                      \
        _mm_prefetch((const char *)b + PREFETCH_BYTES + 64, _MM_HINT_T0);                                 \
        __m256i x = _mm256_loadu_si256((const __m256i *)(q + k * QK));                                   \
        float scaled[4];                                                                                  \
        _mm_storeu_ps(scaled, _mm_mul_ps(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)b->d)),          \
                                         _mm_set1_ps(scale[k])));                                         \
        for (int i = 0; i < GROUP; i++) {                                                                 \
            __m256i w = _mm256_loadu_si256((const __m256i *)b->qs[i]);                                    \
            __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));         \
            __m256i p = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));                                   \
            acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(scaled[i]), _mm256_cvtepi32_ps(p), acc[i]);          \
        }                                                                                                 \
    }                                                                                                     \
    for (int i = 0; i < GROUP; i++) {                                                                     \
        y[i] = sum_of_8(acc[i]);                                                                          \
    }

/* AVX-512 VNNI, 4 bits: the whole group's block in one 512-bit register, four rows of 16 nibble bytes,
 * against the block's activations broadcast to the four 128-bit lanes; dpbusd multiplies and sums four
 * byte pairs into each int32 lane in one instruction, so a row's products land in its lane's 4 int32s. */
#define NP_Q4_512_BODY(R)                                                                                 \
    const q4_group *g = group;                                                                           \
    const __m512i low = _mm512_set1_epi8(0x0f);                                                          \
    const __m512i by_row = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);            \
    __m512 acc[R];                                                                                        \
    __m128 minimums[R];                                                                                   \
    for (int r = 0; r < R; r++) {                                                                         \
        acc[r] = _mm512_setzero_ps();                                                                     \
        minimums[r] = _mm_setzero_ps();                                                                   \
    }                                                                                                     \
    for (int64_t k = 0; k < nb; k++) {                                                                    \
        NP_Q4_BLOCK_SCALES                                                                                \
        __m512i w = _mm512_loadu_si512(b->qs);                                                            \
        __m512i lo = _mm512_and_si512(w, low), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);      \
        /* each row's scale over its four lanes, once for all activation rows */                          \
        __m512 dw = _mm512_permutexvar_ps(by_row, _mm512_castps256_ps512(dm));                            \
        for (int r = 0; r < R; r++) {                                                                     \
            const int8_t *qb = q + (r * nb + k) * QK;                                                     \
            __m512i xlo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qb));                   \
            __m512i xhi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(qb + 16)));            \
            __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xlo), hi, xhi); \
            __m512 px = _mm512_mul_ps(_mm512_cvtepi32_ps(p), _mm512_set1_ps(scale[r * nb + k]));          \
            acc[r] = _mm512_fmadd_ps(dw, px, acc[r]);                                                     \
            minimums[r] = _mm_fmadd_ps(m, _mm_set1_ps(ssum[r * nb + k]), minimums[r]);                    \
        }                                                                                                 \
    }                                                                                                     \
    for (int r = 0; r < R; r++) {                                                                         \
        float lanes[16], mins[4];                                                                         \
        _mm512_storeu_ps(lanes, acc[r]);                                                                  \
        _mm_storeu_ps(mins, minimums[r]);                                                                 \
        for (int i = 0; i < GROUP; i++) {                                                                 \
            float four = (lanes[4 * i] + lanes[4 * i + 1]) + (lanes[4 * i + 2] + lanes[4 * i + 3]);      \
            y[r * GROUP + i] = four + mins[i];                                                            \
        }                                                                                                 \
    }

/* AVX-512 VNNI, 8 bits: two weight rows' 32 bytes per 512-bit register against a block of activations in
 * both halves. dpbusd wants unsigned times signed, so the weights are read with their top bit flipped,
 * w + 128 as an unsigned byte, once a block for all R activation rows:
 *     sum_j (w_j + 128) * qx_j = sum_j w_j * qx_j + 128 * sum_j qx_j,
 * and the surplus leaves through the block's activation sum, as a Q4_1 minimum of -128 * d would. */
#define NP_Q8_512_BODY(R)                                                                                 \
    const q8_group *g = group;                                                                           \
    const __m512i flip = _mm512_set1_epi8((char)0x80);                                                   \
    const __m512i by_row = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);            \
    __m512 acc01[R], acc23[R];                                                                            \
    __m128 surplus[R];                                                                                    \
    for (int r = 0; r < R; r++) {                                                                         \
        acc01[r] = acc23[r] = _mm512_setzero_ps();                                                        \
        surplus[r] = _mm_setzero_ps();                                                                    \
    }                                                                                                     \
    for (int64_t k = 0; k < nb; k++) {                                                                    \
        const q8_group *b = g + k;                                                                        \
        _mm_prefetch((const char *)b + PREFETCH_BYTES, _MM_HINT_T0);                                      \
        _mm_prefetch((const char *)b + PREFETCH_BYTES + 64, _MM_HINT_T0);                                 \
        __m128 d = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)b->d));                                  \
        __m128 m = _mm_mul_ps(d, _mm_set1_ps(-128.0f));                                                   \
        __m512 d01 = _mm512_permutexvar_ps(by_row, _mm512_castps128_ps512(d));                            \
        __m512 d23 = _mm512_permutexvar_ps(by_row, _mm512_castps128_ps512(_mm_movehl_ps(d, d)));          \
        __m512i w01 = _mm512_xor_si512(_mm512_loadu_si512(b->qs[0]), flip);                               \
        __m512i w23 = _mm512_xor_si512(_mm512_loadu_si512(b->qs[2]), flip);                               \
        for (int r = 0; r < R; r++) {                                                                     \
            const int8_t *qb = q + (r * nb + k) * QK;                                                     \
            __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)qb));                 \
            __m512 dx = _mm512_set1_ps(scale[r * nb + k]);                                                \
            __m512i p01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w01, x);                            \
            __m512i p23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w23, x);                            \
            acc01[r] = _mm512_fmadd_ps(d01, _mm512_mul_ps(_mm512_cvtepi32_ps(p01), dx), acc01[r]);        \
            acc23[r] = _mm512_fmadd_ps(d23, _mm512_mul_ps(_mm512_cvtepi32_ps(p23), dx), acc23[r]);        \
            surplus[r] = _mm_fmadd_ps(m, _mm_set1_ps(ssum[r * nb + k]), surplus[r]);                      \
        }                                                                                                 \
    }                                                                                                     \
    for (int r = 0; r < R; r++) {                                                                         \
        float less[4];                                                                                    \
        _mm_storeu_ps(less, surplus[r]);                                                                  \
        y[r * GROUP + 0] = sum_of_8(_mm512_castps512_ps256(acc01[r])) + less[0];                          \
        y[r * GROUP + 1] = sum_of_8(_mm512_extractf32x8_ps(acc01[r], 1)) + less[1];                       \
        y[r * GROUP + 2] = sum_of_8(_mm512_castps512_ps256(acc23[r])) + less[2];                          \
        y[r * GROUP + 3] = sum_of_8(_mm512_extractf32x8_ps(acc23[r], 1)) + less[3];                       \
    }

#define NP_AVX512 "avx2,fma,f16c,avx512f,avx512bw,avx512dq,avx512vl,avx512vnni"


#define NP_DEFINE(NAME, TARGET, BODY)                                                                     \
    __attribute__((target(TARGET))) static void NAME(const void *group, int64_t nb, const int8_t *q,      \
                                                     const float *scale, const float *ssum, float *y) {  \
        BODY                                                                                              \
    }

NP_DEFINE(q4_avx2_1, NP_AVX2, NP_Q4_BODY(1))
NP_DEFINE(q4_avx2_4, NP_AVX2, NP_Q4_BODY(CHUNK))
NP_DEFINE(q8_avx2_1, NP_AVX2, NP_Q8_BODY)
NP_DEFINE(q4_avx512_1, NP_AVX512, NP_Q4_512_BODY(1))
NP_DEFINE(q4_avx512_4, NP_AVX512, NP_Q4_512_BODY(CHUNK))
NP_DEFINE(q8_avx512_1, NP_AVX512, NP_Q8_512_BODY(1))
NP_DEFINE(q8_avx512_4, NP_AVX512, NP_Q8_512_BODY(CHUNK))
#endif

typedef struct {
    const uint8_t *w;
    int64_t group_bytes; /* of one group's block */
    int64_t out, nb, rows;
    const int8_t *q;
    const float *scale, *ssum;
    float *y;
    group_fn one, chunk; /* one activation row at a time; CHUNK rows at a time (NULL: none) */
} block_job;

static void run_groups(block_job *job, int64_t first, int64_t last) {
    int64_t nb = job->nb;
    float part[CHUNK * GROUP];
    for (int64_t group = first; group < last; group++) {
        int64_t o = group * GROUP, count = job->out - o < GROUP ? job->out - o : GROUP;
        const uint8_t *w = job->w + group * nb * job->group_bytes;
        /* every batch row against these weight rows while they sit in L1 */
        for (int64_t r = 0; r < job->rows;) {
            int64_t take = job->chunk && job->rows - r >= CHUNK ? CHUNK : 1;
            (take == CHUNK ? job->chunk : job->one)(w, nb, job->q + r * nb * QK, job->scale + r * nb,
                                                     job->ssum + r * nb, part);
            for (int64_t i = 0; i < take; i++) {
                memcpy(job->y + (r + i) * job->out + o, part + i * GROUP, sizeof(float) * (size_t)count);
            }
            r += take;
        }
    }
}

static int64_t groups_of(int64_t out) { return (out + GROUP - 1) / GROUP; }

static void run_share(void *data) {
    block_job *job = data;
    int64_t part, team, groups = groups_of(job->out);
    np_team(&part, &team);
    int64_t per = (groups + team - 1) / team;
    int64_t first = part * per, last = first + per < groups ? first + per : groups;
    if (first < last) {
        run_groups(job, first, last);
    }
}

/* The kernels for `bits` on this CPU, up to vector level `simd` (0 portable, 1 AVX2, 2 AVX-512 VNNI):
 * (one row, CHUNK rows or NULL). */
static void pick_kernels(int bits, int simd, group_fn *one, group_fn *chunk) {
    *one = bits == 4 ? q4_scalar : q8_scalar;
    *chunk = NULL;
#ifdef NP_BL_X86
    if (simd >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c")) {
        int wide = simd >= 2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512vnni");
        if (bits == 4) {
            *one = wide ? q4_avx512_1 : q4_avx2_1;
            *chunk = wide ? q4_avx512_4 : q4_avx2_4;
        } else {
            *one = wide ? q8_avx512_1 : q8_avx2_1;
            *chunk = wide ? q8_avx512_4 : NULL;
        }
    }
#endif
    (void)simd;
}

int np_block_linear(const uint8_t *packed, int32_t bits, int64_t out, int64_t in, const float *x, int64_t rows,
                    float *y, int32_t threads, int32_t simd) {
    if ((bits != 4 && bits != 8) || out < 1 || in < 1 || rows < 1 || threads < 1) {
        return NP_ERR_ARG;
    }
    int64_t nb = (in + QK - 1) / QK;
    int8_t *q = np_malloc((size_t)(rows * nb * QK));
    float *scales = np_malloc(sizeof(float) * (size_t)(rows * nb * 2));
    if (!q || !scales) {
        np_free(q);
        np_free(scales);
        return NP_ERR_NOMEM;
    }
    for (int64_t r = 0; r < rows; r++) {
        quantize_row(x + r * in, in, q + r * nb * QK, scales + r * nb, scales + rows * nb + r * nb);
    }
    int64_t group_bytes = bits == 4 ? (int64_t)sizeof(q4_group) : (int64_t)sizeof(q8_group);
    block_job job = {packed, group_bytes, out, nb, rows, q, scales, scales + rows * nb, y, NULL, NULL};
    pick_kernels(bits, simd, &job.one, &job.chunk);
    np_run_parallel(run_share, &job, groups_of(out) >= threads ? threads : 1);
    np_free(q);
    np_free(scales);
    return NP_OK;
}

int np_block_simd(void) {
    group_fn one, chunk;
    pick_kernels(4, 2, &one, &chunk);
#ifdef NP_BL_X86
    if (one == q4_avx512_1) {
        return 2;
    }
#endif
    return one != q4_scalar;
}
