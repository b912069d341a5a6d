/* mlp.h — the cpu backend's model: a multilayer perceptron with ReLU, softmax
 * cross-entropy, and SGD with momentum and weight decay. Matrix products go
 * through OpenBLAS (cblas_sgemm); every buffer is allocated once. */
#ifndef ZP_MLP_H
#define ZP_MLP_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define ZP_MLP_MAX_LAYERS 9

#ifdef __CUDACC__
#define ZP_HOST_DEVICE __host__ __device__
#else
#define ZP_HOST_DEVICE
#endif

/* Softmax of one row of c logits, in place (the largest subtracted, the sum
 * in double); returns the index of the largest logit. The cpu backend and the
 * cuda kernel both use it, so that they agree to float32 rounding. */
ZP_HOST_DEVICE static inline int zp_softmax_row(float *row, int c)
{
    float mx = row[0];
    int arg = 0;
    for (int j = 1; j < c; j++)
        if (row[j] > mx)
            mx = row[j], arg = j;
    double sum = 0;
    for (int j = 0; j < c; j++)
        sum += row[j] = expf(row[j] - mx);
    for (int j = 0; j < c; j++)
        row[j] = (float)(row[j] / sum);
    return arg;
}

typedef struct {
    int nlayers;                /* weight layers */
    int dims[ZP_MLP_MAX_LAYERS + 1];
    int max_batch;
    float *w[ZP_MLP_MAX_LAYERS], *b[ZP_MLP_MAX_LAYERS];   /* weights [in x out], biases */
    float *gw[ZP_MLP_MAX_LAYERS], *gb[ZP_MLP_MAX_LAYERS]; /* gradients */
    float *vw[ZP_MLP_MAX_LAYERS], *vb[ZP_MLP_MAX_LAYERS]; /* momentum / Adam's first moment */
    float *sw[ZP_MLP_MAX_LAYERS], *sb[ZP_MLP_MAX_LAYERS]; /* Adam's second moment */
    float *act[ZP_MLP_MAX_LAYERS + 1]; /* act[l+1] = output of layer l; act[0] unused */
    float *grad[ZP_MLP_MAX_LAYERS + 1];
} zp_mlp_t;

/* dims: input, hidden..., classes. Weights drawn like PyTorch's nn.Linear
 * (uniform in +-1/sqrt(fan_in)) from `seed`. */
int zp_mlp_init(zp_mlp_t *m, const int *dims, int nlayers, int max_batch, uint64_t seed);
void zp_mlp_free(zp_mlp_t *m);

/* Forward pass on x[n x dims[0]] (not copied, not modified); returns the mean
 * loss and counts correct predictions. The logits stay for backward. */
double zp_mlp_forward(zp_mlp_t *m, const float *x, const int32_t *labels, int n, int *correct);
/* The predicted class of each of the last forward's n rows. */
void zp_mlp_predict(const zp_mlp_t *m, int n, int32_t *pred);

enum { ZP_OPT_SGD, ZP_OPT_ADAMW };

typedef struct {
    int kind;
    float lr, momentum, weight_decay; /* SGD: L2 added to the gradient; AdamW: decoupled */
    float beta1, beta2, eps;
    int64_t t; /* steps taken, this one included (Adam's bias correction) */
} zp_opt_t;

/* Gradients of the last forward's loss, into gw/gb. */
void zp_mlp_backward(zp_mlp_t *m, const float *x, const int32_t *labels, int n);
/* Returns 1 when a gradient holds a NaN or infinity, naming the first layer
 * (from 0) and tensor; 0 otherwise. */
int zp_mlp_check_grads(const zp_mlp_t *m, int *layer, const char **tensor);
/* After a forward pass of n rows whose loss is not finite: names the first
 * layer whose weights, biases or output hold a NaN or infinity. */
int zp_mlp_check_forward(const zp_mlp_t *m, int n, int *layer, const char **tensor);
/* One optimizer step with the gradients. */
void zp_mlp_step(zp_mlp_t *m, const zp_opt_t *o);

/* The model and optimizer state as bytes: u32 layers, u32 dims[layers + 1],
 * then per layer the weights, biases, their first and second moments (float32). */
size_t zp_mlp_state_bytes(const zp_mlp_t *m);
void zp_mlp_save(const zp_mlp_t *m, void *buf);
/* Loads a saved state; ZP_EINVAL when its shape differs from this model's. */
int zp_mlp_load(zp_mlp_t *m, const void *buf, size_t bytes);

#endif
