/* mlp.h — the cpu backend's model: a multilayer perceptron with ReLU, softmax
 * cross-entropy, and SGD with momentum and weight decay. Matrix products go
 * through OpenBLAS (cblas_sgemm); every buffer is allocated once. */
#ifndef ZP_MLP_H
#define ZP_MLP_H

#include <stddef.h>
#include <stdint.h>

#define ZP_MLP_MAX_LAYERS 9

typedef struct {
    int nlayers;                /* weight layers */
    int dims[ZP_MLP_MAX_LAYERS + 1];
    int max_batch;
    float *w[ZP_MLP_MAX_LAYERS], *b[ZP_MLP_MAX_LAYERS];   /* weights [in x out], biases */
    float *gw[ZP_MLP_MAX_LAYERS], *gb[ZP_MLP_MAX_LAYERS]; /* gradients */
    float *vw[ZP_MLP_MAX_LAYERS], *vb[ZP_MLP_MAX_LAYERS]; /* momentum */
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
/* Backward pass from the last forward, then one SGD step. */
void zp_mlp_backward_step(zp_mlp_t *m, const float *x, const int32_t *labels, int n, float lr,
                          float momentum, float weight_decay);

/* The model and optimizer state as bytes: u32 layers, u32 dims[layers + 1],
 * then per layer the weights, biases and their momentum buffers (float32). */
size_t zp_mlp_state_bytes(const zp_mlp_t *m);
void zp_mlp_save(const zp_mlp_t *m, void *buf);
/* Loads a saved state; ZP_EINVAL when its shape differs from this model's. */
int zp_mlp_load(zp_mlp_t *m, const void *buf, size_t bytes);

#endif
