/* One decode step's attention: each sequence's single query row against its keys and values, read in place
 * from a layer's paged KV pool through the sequence's block table (no gathered copy), the softmax computed
 * online: a position at a time in the portable loop, 64 at a time in the AVX2 one. The Python twin is
 * engine/llama.py's _decode_attention (a gather and torch's SDPA). Work is split over (sequence, KV head)
 * pairs on torch's threads (parallel.c). */
#include "native_paths.h"

#include <math.h>

typedef struct {
    const float *q, *pool;
    const int64_t *tables, *lens;
    int64_t batch, n_heads, n_kv, head_dim, block_size, table_width;
    float scale;
    float *out;
    int vector; /* the AVX2 path may run */
} attention_job;

/* The query heads of KV head `g` of sequence `b`: out = softmax(q K^T * scale) V over its `len` positions. */
static void attend(const attention_job *job, int64_t b, int64_t g) {
    int64_t hd = job->head_dim, group = job->n_heads / job->n_kv, kv_width = job->n_kv * hd;
    int64_t len = job->lens[b], bs = job->block_size;
    const int64_t *table = job->tables + b * job->table_width;
    for (int64_t h = g * group; h < (g + 1) * group; h++) {
        const float *q = job->q + (b * job->n_heads + h) * hd;
        float *acc = job->out + (b * job->n_heads + h) * hd;
        float running_max = -INFINITY, total = 0.0f;
        for (int64_t j = 0; j < hd; j++) {
            acc[j] = 0.0f;
        }
        for (int64_t t = 0; t < len; t++) {
            /* a slot holds this position's K of every KV head, then its V of every KV head */
            const float *slot = job->pool + (table[t / bs] * bs + t % bs) * 2 * kv_width;
            const float *k = slot + g * hd, *v = slot + kv_width + g * hd;
            float score = 0.0f;
            for (int64_t j = 0; j < hd; j++) {
                score += q[j] * k[j];
            }
            score *= job->scale;
            if (score > running_max) { /* rescale what was summed against the old maximum */
                float shrink = expf(running_max - score);
                total *= shrink;
                for (int64_t j = 0; j < hd; j++) {
                    acc[j] *= shrink;
                }
                running_max = score;
            }
            float weight = expf(score - running_max);
            total += weight;
            for (int64_t j = 0; j < hd; j++) {
                acc[j] += weight * v[j];
            }
        }
        for (int64_t j = 0; j < hd; j++) {
            acc[j] /= total;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NP_ATTENTION_AVX2 1
#define AVX2 "avx2,fma"
#define CHUNK 64        /* positions whose scores are kept at once */
#define MAX_GROUP 16    /* query heads a KV head serves, at most, on the vector path */

/* e^x for x <= 0 (scores less their maximum), 8 at a time: x = n ln2 + r, e^x = 2^n e^r, with e^r from
 * a polynomial on |r| <= ln2 / 2 (Cephes' expf coefficients); below -87 it gives e^-87, next to nothing. */
__attribute__((target(AVX2))) static __m256 exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
}

__attribute__((target(AVX2))) static float dot(const float *a, const float *b, int64_t n) {
    __m256 sum = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        sum = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), sum);
    }
    __m128 half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
    half = _mm_add_ps(half, _mm_movehl_ps(half, half));
    float total = _mm_cvtss_f32(_mm_add_ss(half, _mm_movehdup_ps(half)));
    for (; j < n; j++) {
        total += a[j] * b[j];
    }
    return total;
}

/* acc[0..n) = acc * scale + weight * v (scale 1: a plain update) */
__attribute__((target(AVX2))) static void scale_add(float *acc, float scale, float weight, const float *v,
                                                    int64_t n) {
    __m256 s = _mm256_set1_ps(scale), w = _mm256_set1_ps(weight);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 kept = _mm256_mul_ps(_mm256_loadu_ps(acc + j), s);
        _mm256_storeu_ps(acc + j, _mm256_fmadd_ps(w, _mm256_loadu_ps(v + j), kept));
    }
    for (; j < n; j++) {
        acc[j] = acc[j] * scale + weight * v[j];
    }
}

/* out = out * shrink + sum_i weights[i] * (the value at slots[i] + offset), 64 columns at a time held in
 * registers across the chunk's positions (per column the same operations, in the same order, as one
 * scale_add a position). */
__attribute__((target(AVX2))) static void add_values(float *out, float shrink, const float *weights,
                                                     const float *const *slots, int64_t n, int64_t offset,
                                                     int64_t hd) {
    __m256 s = _mm256_set1_ps(shrink);
    int64_t j = 0;
    for (; j + 64 <= hd; j += 64) {
        __m256 acc[8];
        for (int c = 0; c < 8; c++) {
            acc[c] = _mm256_mul_ps(_mm256_loadu_ps(out + j + 8 * c), s);
        }
        for (int64_t i = 0; i < n; i++) {
            const float *v = slots[i] + offset + j;
            __m256 w = _mm256_set1_ps(weights[i]);
            for (int c = 0; c < 8; c++) {
                acc[c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * c), acc[c]);
            }
        }
        for (int c = 0; c < 8; c++) {
            _mm256_storeu_ps(out + j + 8 * c, acc[c]);
        }
    }
    for (; j + 8 <= hd; j += 8) {
        __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(out + j), s);
        for (int64_t i = 0; i < n; i++) {
            acc = _mm256_fmadd_ps(_mm256_set1_ps(weights[i]), _mm256_loadu_ps(slots[i] + offset + j), acc);
        }
        _mm256_storeu_ps(out + j, acc);
    }
    for (; j < hd; j++) {
        float acc = out[j] * shrink;
        for (int64_t i = 0; i < n; i++) {
            acc += weights[i] * slots[i][offset + j];
        }
        out[j] = acc;
    }
}

/* Asks for a position's key and value of one KV head (a 64-byte line every 16 floats) ahead of their use:
 * positions lie a slot apart in the pool, too far apart for the hardware prefetcher to follow. */
#define AHEAD 8 /* positions */
static inline void fetch_position(const float *k, int64_t kv_width, int64_t hd) {
    for (int64_t j = 0; j < hd; j += 16) {
        _mm_prefetch((const char *)(k + j), _MM_HINT_T0);
        _mm_prefetch((const char *)(k + kv_width + j), _MM_HINT_T0);
    }
}

/* attend(), CHUNK positions at a time: their scores for every query head of the group, one rescale of the
 * running sums per chunk, the exponentials 8 at a time, then the values. */
__attribute__((target(AVX2))) static void attend_avx2(const attention_job *job, int64_t b, int64_t g) {
    int64_t hd = job->head_dim, group = job->n_heads / job->n_kv, kv_width = job->n_kv * hd;
    int64_t len = job->lens[b], bs = job->block_size;
    const int64_t *table = job->tables + b * job->table_width;
    const float *q = job->q + (b * job->n_heads + g * group) * hd;
    float *out = job->out + (b * job->n_heads + g * group) * hd;
    float scores[MAX_GROUP][CHUNK], running_max[MAX_GROUP], total[MAX_GROUP], shrink[MAX_GROUP];
    const float *slots[CHUNK];
    for (int64_t h = 0; h < group; h++) {
        running_max[h] = -INFINITY;
        total[h] = 0.0f;
        for (int64_t j = 0; j < hd; j++) {
            out[h * hd + j] = 0.0f;
        }
    }
    for (int64_t start = 0; start < len; start += CHUNK) {
        int64_t n = len - start < CHUNK ? len - start : CHUNK;
        for (int64_t i = 0; i < n; i++) {
            int64_t t = start + i;
            slots[i] = job->pool + (table[t / bs] * bs + t % bs) * 2 * kv_width + g * hd;
        }
        for (int64_t i = 0; i < n && i < AHEAD; i++) {
            fetch_position(slots[i], kv_width, hd);
        }
        for (int64_t i = 0; i < n; i++) {
            if (i + AHEAD < n) {
                fetch_position(slots[i + AHEAD], kv_width, hd);
            }
            for (int64_t h = 0; h < group; h++) {
                scores[h][i] = dot(q + h * hd, slots[i], hd) * job->scale;
            }
        }
        for (int64_t h = 0; h < group; h++) {
            float chunk_max = scores[h][0];
            for (int64_t i = 1; i < n; i++) {
                chunk_max = scores[h][i] > chunk_max ? scores[h][i] : chunk_max;
            }
            float new_max = chunk_max > running_max[h] ? chunk_max : running_max[h];
            shrink[h] = expf(running_max[h] - new_max);
            total[h] *= shrink[h];
            running_max[h] = new_max;
            int64_t i = 0;
            __m256 sum = _mm256_setzero_ps();
            for (; i + 8 <= n; i += 8) {
                __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(scores[h] + i), _mm256_set1_ps(new_max)));
                _mm256_storeu_ps(scores[h] + i, e);
                sum = _mm256_add_ps(sum, e);
            }
            float lanes[8];
            _mm256_storeu_ps(lanes, sum);
            for (int j = 0; j < 8; j++) {
                total[h] += lanes[j];
            }
            for (; i < n; i++) {
                scores[h][i] = expf(scores[h][i] - new_max);
                total[h] += scores[h][i];
            }
        }
        for (int64_t h = 0; h < group; h++) {
            add_values(out + h * hd, shrink[h], scores[h], slots, n, kv_width, hd);
        }
    }
    for (int64_t h = 0; h < group; h++) {
        scale_add(out + h * hd, 1.0f / total[h], 0.0f, out + h * hd, hd);
    }
}
#endif

static void run_share(void *data) {
    attention_job *job = data;
    int64_t part, team, tasks = job->batch * job->n_kv;
    np_team(&part, &team);
    for (int64_t task = part; task < tasks; task += team) {
#ifdef NP_ATTENTION_AVX2
        if (job->vector && job->n_heads / job->n_kv <= MAX_GROUP) {
            attend_avx2(job, task / job->n_kv, task % job->n_kv);
            continue;
        }
#endif
        attend(job, task / job->n_kv, task % job->n_kv);
    }
}

int np_check_paged_lengths(int64_t batch, int64_t num_blocks, int64_t block_size, const int64_t *tables,
                            int64_t table_width, const int64_t *lens) {
    for (int64_t b = 0; b < batch; b++) {
        if (lens[b] < 1 || lens[b] > table_width * block_size) {
            return NP_ERR_ARG;
        }
        for (int64_t i = 0; i < (lens[b] + block_size - 1) / block_size; i++) {
            int64_t block = tables[b * table_width + i];
            if (block < 0 || block >= num_blocks) {
                return NP_ERR_ARG;
            }
        }
    }
    return NP_OK;
}

void np_decode_attention_checked(const float *q, int64_t batch, int64_t n_heads, int64_t n_kv, int64_t head_dim,
                                 const float *pool, int64_t block_size, const int64_t *tables,
                                 int64_t table_width, const int64_t *lens, float scale, float *out,
                                 int32_t threads, int32_t simd) {
    attention_job job = {q, pool, tables, lens, batch, n_heads, n_kv, head_dim, block_size, table_width,
                         scale, out, 0};
#ifdef NP_ATTENTION_AVX2
    job.vector = simd >= 1 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
    (void)simd;
    int64_t tasks = batch * n_kv;
    np_run_parallel(run_share, &job, tasks >= threads ? threads : 1);
}

int np_decode_attention(const float *q, int64_t batch, int64_t n_heads, int64_t n_kv, int64_t head_dim,
                        const float *pool, int64_t num_blocks, int64_t block_size, const int64_t *tables,
                        int64_t table_width, const int64_t *lens, float scale, float *out, int32_t threads,
                        int32_t simd) {
    if (batch < 1 || n_kv < 1 || n_heads < n_kv || n_heads % n_kv || head_dim < 1 || num_blocks < 1 ||
        block_size < 1 || table_width < 1 || threads < 1 || !(scale > 0.0f) ||
        np_check_paged_lengths(batch, num_blocks, block_size, tables, table_width, lens) != NP_OK) {
        return NP_ERR_ARG;
    }
    np_decode_attention_checked(q, batch, n_heads, n_kv, head_dim, pool, block_size, tables, table_width, lens,
                                scale, out, threads, simd);
    return NP_OK;
}
