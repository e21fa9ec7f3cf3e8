/* Every transformer layer of a decode step in one call: norm, QKV, rotary, the KV write, attention, output
 * projection, norm, SwiGLU and down projection, layer after layer, over block-quantized weights. Python
 * crosses into C once a step with the step's buffers, where the per-op path (engine/llama.py's
 * run_layers, this call's Python twin) makes some thirty small torch calls a layer around the same
 * linears and attention. The linears and the attention are block_linear.c's and decode_attention.c's;
 * what this file adds is the small element-wise work between them, on the calling thread (a decode
 * batch's rows are a few hundred floats each). */
#include "native_paths.h"

#include <math.h>
#include <string.h>

/* out = x / sqrt(mean(x^2) + eps) * weight, as torch's rms_norm (sum in double: one rounding, not dim). */
static void rms_norm(const float *x, const float *weight, int64_t dim, float eps, float *out) {
    double squares = 0.0;
    for (int64_t i = 0; i < dim; i++) {
        squares += (double)x[i] * x[i];
    }
    float inverse = 1.0f / sqrtf((float)(squares / (double)dim) + eps);
    for (int64_t i = 0; i < dim; i++) {
        out[i] = x[i] * inverse * weight[i];
    }
}

/* Rotates `heads` heads of adjacent pairs (llama.cpp's layout of GGUF Q/K rows) by the row's (cos, sin)
 * pairs, from `in` to `out` (which may be the same). */
static void rotate(const float *in, int64_t heads, int64_t head_dim, const float *cos_sin, float *out) {
    for (int64_t h = 0; h < heads; h++) {
        for (int64_t i = 0; i < head_dim / 2; i++) {
            float a = in[h * head_dim + 2 * i], b = in[h * head_dim + 2 * i + 1];
            float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
            out[h * head_dim + 2 * i] = a * c - b * s;
            out[h * head_dim + 2 * i + 1] = a * s + b * c;
        }
    }
}

/* x[0..n) += delta[0..n): a residual connection */
static void add_into(float *x, const float *delta, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        x[i] += delta[i];
    }
}

static int slots_fit(int64_t batch, const int64_t *slots, int64_t capacity) {
    for (int64_t b = 0; b < batch; b++) {
        if (slots[b] < 0 || slots[b] >= capacity) {
            return 0;
        }
    }
    return 1;
}

int np_decode_layers(const np_decode_layer *layers, int64_t n_layers, const np_decode_shape *shape, float *x,
                     int64_t batch, const float *rope, const int64_t *slots, const int64_t *tables,
                     int64_t table_width, const int64_t *lens, int32_t threads, int32_t simd) {
    int64_t dim = shape->dim, n_heads = shape->n_heads, n_kv = shape->n_kv, hd = shape->head_dim;
    int64_t hidden = shape->hidden, bs = shape->block_size, num_blocks = shape->num_blocks;
    if (n_layers < 1 || batch < 1 || dim < 1 || n_kv < 1 || n_heads < n_kv || n_heads % n_kv || hd < 2 ||
        hd % 2 || hidden < 1 || bs < 1 || num_blocks < 1 || table_width < 1 || threads < 1 ||
        !(shape->eps >= 0.0f)) {
        return NP_ERR_ARG;
    }
    /* every index is checked once, before the first layer writes its keys: a refused step changes nothing */
    if (!slots_fit(batch, slots, num_blocks * bs) ||
        np_check_paged_lengths(batch, num_blocks, bs, tables, table_width, lens) != NP_OK) {
        return NP_ERR_ARG;
    }
    int64_t q_width = n_heads * hd, kv_width = n_kv * hd, qkv_width = q_width + 2 * kv_width;
    int64_t widest = qkv_width > 2 * hidden ? qkv_width : 2 * hidden;
    /* h: a norm's output or the attention's; wide: QKV or gate and up; q: the rotated queries */
    float *h = np_malloc(sizeof(float) * (size_t)(batch * (dim > q_width ? dim : q_width)));
    float *wide = np_malloc(sizeof(float) * (size_t)(batch * widest));
    float *q = np_malloc(sizeof(float) * (size_t)(batch * (q_width > hidden ? q_width : hidden)));
    float *delta = np_malloc(sizeof(float) * (size_t)(batch * dim));
    int status = h && wide && q && delta ? NP_OK : NP_ERR_NOMEM;
    float scale = 1.0f / sqrtf((float)hd);
    int attention_simd = simd >= 1;
    for (int64_t l = 0; l < n_layers && status == NP_OK; l++) {
        const np_decode_layer *layer = &layers[l];
        for (int64_t b = 0; b < batch; b++) {
            rms_norm(x + b * dim, layer->attn_norm, dim, shape->eps, h + b * dim);
        }
        status = np_block_linear(layer->qkv, 4, qkv_width, dim, h, batch, wide, threads, simd);
        if (status != NP_OK) {
            break;
        }
        for (int64_t b = 0; b < batch; b++) {
            const float *row = wide + b * qkv_width, *cos_sin = rope + b * hd;
            float *kv = layer->pool + slots[b] * 2 * kv_width;
            rotate(row, n_heads, hd, cos_sin, q + b * q_width);
            rotate(row + q_width, n_kv, hd, cos_sin, kv);
            memcpy(kv + kv_width, row + q_width + kv_width, sizeof(float) * (size_t)kv_width);
        }
        np_decode_attention_checked(q, batch, n_heads, n_kv, hd, layer->pool, bs, tables, table_width, lens, scale,
                                    h, threads, attention_simd);
        status = np_block_linear(layer->attn_out, 4, dim, q_width, h, batch, delta, threads, simd);
        if (status != NP_OK) {
            break;
        }
        add_into(x, delta, batch * dim);
        for (int64_t b = 0; b < batch; b++) {
            rms_norm(x + b * dim, layer->ffn_norm, dim, shape->eps, h + b * dim);
        }
        status = np_block_linear(layer->gate_up, 4, 2 * hidden, dim, h, batch, wide, threads, simd);
        if (status != NP_OK) {
            break;
        }
        for (int64_t b = 0; b < batch; b++) {
            const float *gate = wide + b * 2 * hidden, *up = gate + hidden;
            for (int64_t i = 0; i < hidden; i++) {
                q[b * hidden + i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
            }
        }
        status = np_block_linear(layer->down, 4, dim, hidden, q, batch, delta, threads, simd);
        if (status == NP_OK) {
            add_into(x, delta, batch * dim);
        }
    }
    np_free(h);
    np_free(wide);
    np_free(q);
    np_free(delta);
    return status;
}
