/* mlp.c — the cpu backend's model: a multilayer perceptron, forward and
 * backward on OpenBLAS, SGD with momentum or Adam, and its parameters'
 * checkpoint layout. */
#include "stages/trainer/mlp.h"
#include "pipeline/base/hash.h"
#include "pipeline/base/log.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *alloc_f(size_t n)
{
    float *p = NULL;
    if (posix_memalign((void **)&p, 64, (n ? n : 1) * sizeof(float)))
        return NULL;
    memset(p, 0, (n ? n : 1) * sizeof(float));
    return p;
}

void zp_mlp_free(zp_mlp_t *m)
{
    for (int l = 0; l < ZP_MLP_MAX_LAYERS; l++) {
        free(m->w[l]), free(m->b[l]), free(m->gw[l]), free(m->gb[l]);
        free(m->vw[l]), free(m->vb[l]), free(m->sw[l]), free(m->sb[l]);
    }
    for (int l = 0; l <= ZP_MLP_MAX_LAYERS; l++)
        free(m->act[l]), free(m->grad[l]);
    memset(m, 0, sizeof *m);
}

int zp_mlp_init(zp_mlp_t *m, const int *dims, int nlayers, int max_batch, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    if (nlayers < 1 || nlayers > ZP_MLP_MAX_LAYERS)
        return ZP_EINVAL;
    m->nlayers = nlayers;
    m->max_batch = max_batch;
    memcpy(m->dims, dims, sizeof(int) * (size_t)(nlayers + 1));
    zp_rng_t r;
    zp_rng_seed(&r, seed ^ 0x6d6c70ull);
    for (int l = 0; l < nlayers; l++) {
        size_t in = (size_t)dims[l], out = (size_t)dims[l + 1];
        m->w[l] = alloc_f(in * out), m->gw[l] = alloc_f(in * out), m->vw[l] = alloc_f(in * out);
        m->b[l] = alloc_f(out), m->gb[l] = alloc_f(out), m->vb[l] = alloc_f(out);
        m->sw[l] = alloc_f(in * out), m->sb[l] = alloc_f(out);
        m->act[l + 1] = alloc_f((size_t)max_batch * out);
        m->grad[l + 1] = alloc_f((size_t)max_batch * out);
        if (!m->w[l] || !m->gw[l] || !m->vw[l] || !m->b[l] || !m->gb[l] || !m->vb[l] ||
            !m->sw[l] || !m->sb[l] ||
            !m->act[l + 1] || !m->grad[l + 1]) {
            zp_mlp_free(m);
            return ZP_ENOMEM;
        }
        float bound = 1.0f / sqrtf((float)in);
        for (size_t i = 0; i < in * out; i++)
            m->w[l][i] = (2 * zp_rng_float(&r) - 1) * bound;
        for (size_t i = 0; i < out; i++)
            m->b[l][i] = (2 * zp_rng_float(&r) - 1) * bound;
    }
    m->grad[0] = alloc_f((size_t)max_batch * (size_t)dims[0]);
    if (!m->grad[0]) {
        zp_mlp_free(m);
        return ZP_ENOMEM;
    }
    return 0;
}

double zp_mlp_forward(zp_mlp_t *m, const float *x, const int32_t *labels, int n, int *correct)
{
    const float *in = x;
    for (int l = 0; l < m->nlayers; l++) {
        int k = m->dims[l], o = m->dims[l + 1];
        float *z = m->act[l + 1];
        for (int i = 0; i < n; i++)
            memcpy(z + (size_t)i * o, m->b[l], sizeof(float) * (size_t)o);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, o, k, 1.0f, in, k, m->w[l], o,
                    1.0f, z, o);
        if (l + 1 < m->nlayers)
            for (size_t i = 0; i < (size_t)n * o; i++)
                z[i] = z[i] > 0 ? z[i] : 0;
        in = z;
    }
    /* softmax cross-entropy on the logits, in place: act[L] becomes probabilities */
    int c = m->dims[m->nlayers];
    float *p = m->act[m->nlayers];
    double loss = 0;
    *correct = 0;
    for (int i = 0; i < n; i++) {
        float *row = p + (size_t)i * c;
        int arg = zp_softmax_row(row, c);
        int y = labels[i] >= 0 && labels[i] < c ? labels[i] : 0;
        loss -= log(row[y] > 1e-30f ? row[y] : 1e-30f);
        *correct += arg == y;
    }
    return n ? loss / n : 0;
}

void zp_mlp_predict(const zp_mlp_t *m, int n, int32_t *pred)
{
    int c = m->dims[m->nlayers];
    const float *p = m->act[m->nlayers];
    for (int i = 0; i < n; i++) {
        const float *row = p + (size_t)i * c;
        int arg = 0;
        for (int j = 1; j < c; j++)
            if (row[j] > row[arg])
                arg = j;
        pred[i] = arg;
    }
}

static void sgd(float *w, const float *g, float *v, size_t n, const zp_opt_t *o, float wd)
{
    for (size_t i = 0; i < n; i++) {
        float d = g[i] + wd * w[i];
        v[i] = o->momentum * v[i] + d;
        w[i] -= o->lr * v[i];
    }
}

/* AdamW: m in `v`, the second moment in `s`; weight decay decoupled. */
static void adamw(float *w, const float *g, float *v, float *s, size_t n, const zp_opt_t *o, float wd)
{
    float c1 = 1.0f - powf(o->beta1, (float)o->t), c2 = 1.0f - powf(o->beta2, (float)o->t);
    for (size_t i = 0; i < n; i++) {
        v[i] = o->beta1 * v[i] + (1 - o->beta1) * g[i];
        s[i] = o->beta2 * s[i] + (1 - o->beta2) * g[i] * g[i];
        w[i] -= o->lr * ((v[i] / c1) / (sqrtf(s[i] / c2) + o->eps) + wd * w[i]);
    }
}

void zp_mlp_backward(zp_mlp_t *m, const float *x, const int32_t *labels, int n)
{
    int L = m->nlayers, c = m->dims[L];
    /* dL/dlogits = (p - onehot) / n, into grad[L] */
    float *g = m->grad[L];
    memcpy(g, m->act[L], sizeof(float) * (size_t)n * c);
    for (int i = 0; i < n; i++) {
        int y = labels[i] >= 0 && labels[i] < c ? labels[i] : 0;
        g[(size_t)i * c + y] -= 1.0f;
    }
    cblas_sscal(n * c, 1.0f / (float)n, g, 1);
    for (int l = L - 1; l >= 0; l--) {
        int k = m->dims[l], o = m->dims[l + 1];
        const float *in = l ? m->act[l] : x;
        float *gz = m->grad[l + 1];
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, k, o, n, 1.0f, in, k, gz, o, 0.0f,
                    m->gw[l], o);
        memset(m->gb[l], 0, sizeof(float) * (size_t)o);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < o; j++)
                m->gb[l][j] += gz[(size_t)i * o + j];
        if (l > 0) {
            float *ga = m->grad[l];
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, k, o, 1.0f, gz, o, m->w[l], o,
                        0.0f, ga, k);
            const float *a = m->act[l];
            for (size_t i = 0; i < (size_t)n * k; i++)
                if (a[i] <= 0)
                    ga[i] = 0;
        }
    }
}

void zp_mlp_step(zp_mlp_t *m, const zp_opt_t *o)
{
    for (int l = 0; l < m->nlayers; l++) {
        size_t k = (size_t)m->dims[l], n = (size_t)m->dims[l + 1];
        if (o->kind == ZP_OPT_ADAMW) {
            adamw(m->w[l], m->gw[l], m->vw[l], m->sw[l], k * n, o, o->weight_decay);
            adamw(m->b[l], m->gb[l], m->vb[l], m->sb[l], n, o, 0.0f);
        } else {
            sgd(m->w[l], m->gw[l], m->vw[l], k * n, o, o->weight_decay);
            sgd(m->b[l], m->gb[l], m->vb[l], n, o, 0.0f);
        }
    }
}

/* Sums x * 0 over a tensor: 0 unless a value is NaN or infinite (vectorizes). */
static int all_finite(const float *x, size_t n)
{
    float s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * 0.0f;
    return s == 0;
}

int zp_mlp_check_grads(const zp_mlp_t *m, int *layer, const char **tensor)
{
    for (int l = 0; l < m->nlayers; l++) {
        size_t k = (size_t)m->dims[l], n = (size_t)m->dims[l + 1];
        *layer = l;
        if (!all_finite(m->gw[l], k * n))
            return *tensor = "weight gradient", 1;
        if (!all_finite(m->gb[l], n))
            return *tensor = "bias gradient", 1;
    }
    return 0;
}

int zp_mlp_check_forward(const zp_mlp_t *m, int n, int *layer, const char **tensor)
{
    for (int l = 0; l < m->nlayers; l++) {
        size_t k = (size_t)m->dims[l], o = (size_t)m->dims[l + 1];
        *layer = l;
        if (!all_finite(m->w[l], k * o))
            return *tensor = "weight", 1;
        if (!all_finite(m->b[l], o))
            return *tensor = "bias", 1;
        if (!all_finite(m->act[l + 1], (size_t)n * o))
            return *tensor = l + 1 < m->nlayers ? "output" : "softmax output", 1;
    }
    return 0;
}

/* The buffers of the state, in file order, with their sizes in floats. */
static int state_parts(const zp_mlp_t *m, float **parts, size_t *sizes)
{
    int n = 0;
    for (int l = 0; l < m->nlayers; l++) {
        size_t w = (size_t)m->dims[l] * (size_t)m->dims[l + 1], b = (size_t)m->dims[l + 1];
        parts[n] = m->w[l], sizes[n++] = w;
        parts[n] = m->b[l], sizes[n++] = b;
        parts[n] = m->vw[l], sizes[n++] = w;
        parts[n] = m->vb[l], sizes[n++] = b;
        parts[n] = m->sw[l], sizes[n++] = w;
        parts[n] = m->sb[l], sizes[n++] = b;
    }
    return n;
}

size_t zp_mlp_state_bytes(const zp_mlp_t *m)
{
    float *parts[6 * ZP_MLP_MAX_LAYERS];
    size_t sizes[6 * ZP_MLP_MAX_LAYERS], bytes = 4 * (size_t)(m->nlayers + 2);
    int n = state_parts(m, parts, sizes);
    for (int i = 0; i < n; i++)
        bytes += sizes[i] * sizeof(float);
    return bytes;
}

void zp_mlp_save(const zp_mlp_t *m, void *buf)
{
    uint8_t *p = buf;
    uint32_t layers = (uint32_t)m->nlayers;
    memcpy(p, &layers, 4), p += 4;
    for (int l = 0; l <= m->nlayers; l++) {
        uint32_t d = (uint32_t)m->dims[l];
        memcpy(p, &d, 4), p += 4;
    }
    float *parts[6 * ZP_MLP_MAX_LAYERS];
    size_t sizes[6 * ZP_MLP_MAX_LAYERS];
    int n = state_parts(m, parts, sizes);
    for (int i = 0; i < n; i++) {
        memcpy(p, parts[i], sizes[i] * sizeof(float));
        p += sizes[i] * sizeof(float);
    }
}

int zp_mlp_load(zp_mlp_t *m, const void *buf, size_t bytes)
{
    const uint8_t *p = buf;
    uint32_t layers;
    if (bytes != zp_mlp_state_bytes(m))
        return ZP_EINVAL;
    memcpy(&layers, p, 4), p += 4;
    if ((int)layers != m->nlayers)
        return ZP_EINVAL;
    for (int l = 0; l <= m->nlayers; l++) {
        uint32_t d;
        memcpy(&d, p, 4), p += 4;
        if ((int)d != m->dims[l])
            return ZP_EINVAL;
    }
    float *parts[6 * ZP_MLP_MAX_LAYERS];
    size_t sizes[6 * ZP_MLP_MAX_LAYERS];
    int n = state_parts(m, parts, sizes);
    for (int i = 0; i < n; i++) {
        memcpy(parts[i], p, sizes[i] * sizeof(float));
        p += sizes[i] * sizeof(float);
    }
    return 0;
}
