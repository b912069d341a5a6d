/* Unit tests of the cpu backend's model (stages/trainer/mlp.c): backward
 * agrees with a numerical gradient of forward's loss, an SGD step moves each
 * weight by exactly -lr x its gradient, the non-finite checks name the
 * tensor, and the saved state loads back only into a model of its shape. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "schemas/errors.h"
#include "stages/trainer/mlp.h"

enum { IN = 6, HID = 5, OUT = 3, N = 4 };
static const int dims[] = {IN, HID, OUT};

static void fill_batch(float *x, int32_t *labels)
{
    for (int i = 0; i < N * IN; i++)
        x[i] = (float)sin(0.7 * i + 0.3);
    for (int i = 0; i < N; i++)
        labels[i] = i % OUT;
}

static double loss_of(zp_mlp_t *m, const float *x, const int32_t *labels)
{
    int correct;
    return zp_mlp_forward(m, x, labels, N, &correct);
}

static void backward_matches_a_numerical_gradient(void **state)
{
    (void)state;
    zp_mlp_t m;
    float x[N * IN];
    int32_t labels[N];
    fill_batch(x, labels);
    assert_int_equal(zp_mlp_init(&m, dims, 2, N, 7), 0);
    loss_of(&m, x, labels);
    zp_mlp_backward(&m, x, labels, N);
    const float eps = 1e-2f;
    int checked = 0;
    for (int l = 0; l < 2; l++) {
        size_t nw = (size_t)dims[l] * dims[l + 1];
        for (size_t i = 0; i < nw; i += 3) {
            float keep = m.w[l][i], analytic = m.gw[l][i];
            m.w[l][i] = keep + eps;
            double up = loss_of(&m, x, labels);
            m.w[l][i] = keep - eps;
            double down = loss_of(&m, x, labels);
            m.w[l][i] = keep;
            double numeric = (up - down) / (2.0 * eps);
            assert_true(fabs(numeric - analytic) <= 2e-3 + 2e-2 * fabs(numeric));
            checked++;
        }
        for (int j = 0; j < dims[l + 1]; j++) {
            float keep = m.b[l][j], analytic = m.gb[l][j];
            m.b[l][j] = keep + eps;
            double up = loss_of(&m, x, labels);
            m.b[l][j] = keep - eps;
            double down = loss_of(&m, x, labels);
            m.b[l][j] = keep;
            assert_true(fabs((up - down) / (2.0 * eps) - analytic) <= 2e-3 + 2e-2 * fabs(analytic));
        }
    }
    assert_true(checked > 10);
    zp_mlp_free(&m);
}

static void an_sgd_step_moves_each_weight_by_minus_lr_times_its_gradient(void **state)
{
    (void)state;
    zp_mlp_t m;
    float x[N * IN];
    int32_t labels[N];
    fill_batch(x, labels);
    assert_int_equal(zp_mlp_init(&m, dims, 2, N, 3), 0);
    double before = loss_of(&m, x, labels);
    zp_mlp_backward(&m, x, labels, N);
    float w0[IN * HID], g0[IN * HID], b1[OUT], gb1[OUT];
    memcpy(w0, m.w[0], sizeof w0), memcpy(g0, m.gw[0], sizeof g0);
    memcpy(b1, m.b[1], sizeof b1), memcpy(gb1, m.gb[1], sizeof gb1);
    zp_opt_t o = {.kind = ZP_OPT_SGD, .lr = 0.1f, .t = 1};
    zp_mlp_step(&m, &o);
    for (int i = 0; i < IN * HID; i++)
        assert_true(fabsf(m.w[0][i] - (w0[i] - 0.1f * g0[i])) <= 1e-7f);
    for (int j = 0; j < OUT; j++)
        assert_true(fabsf(m.b[1][j] - (b1[j] - 0.1f * gb1[j])) <= 1e-7f);
    /* a small step against the gradient lowers the loss */
    assert_true(loss_of(&m, x, labels) < before);
    zp_mlp_free(&m);
}

static void a_nan_gradient_is_found_and_named(void **state)
{
    (void)state;
    zp_mlp_t m;
    float x[N * IN];
    int32_t labels[N];
    fill_batch(x, labels);
    assert_int_equal(zp_mlp_init(&m, dims, 2, N, 1), 0);
    loss_of(&m, x, labels);
    zp_mlp_backward(&m, x, labels, N);
    int layer;
    const char *tensor;
    assert_int_equal(zp_mlp_check_grads(&m, &layer, &tensor), 0);
    m.gb[1][2] = NAN;
    assert_int_equal(zp_mlp_check_grads(&m, &layer, &tensor), 1);
    assert_int_equal(layer, 1);
    assert_string_equal(tensor, "bias gradient");
    zp_mlp_free(&m);
}

static void a_saved_state_loads_back_only_into_its_shape(void **state)
{
    (void)state;
    zp_mlp_t a, b, other;
    static const int other_dims[] = {IN, HID + 1, OUT};
    assert_int_equal(zp_mlp_init(&a, dims, 2, N, 11), 0);
    assert_int_equal(zp_mlp_init(&b, dims, 2, N, 12), 0);
    assert_int_equal(zp_mlp_init(&other, other_dims, 2, N, 11), 0);
    size_t bytes = zp_mlp_state_bytes(&a);
    void *buf = malloc(bytes);
    assert_non_null(buf);
    zp_mlp_save(&a, buf);
    assert_int_not_equal(memcmp(a.w[0], b.w[0], sizeof(float) * IN * HID), 0);
    assert_int_equal(zp_mlp_load(&b, buf, bytes), 0);
    assert_memory_equal(a.w[0], b.w[0], sizeof(float) * IN * HID);
    assert_memory_equal(a.b[1], b.b[1], sizeof(float) * OUT);
    assert_int_equal(zp_mlp_load(&other, buf, bytes), ZP_EINVAL);
    free(buf);
    zp_mlp_free(&a), zp_mlp_free(&b), zp_mlp_free(&other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backward_matches_a_numerical_gradient),
        cmocka_unit_test(an_sgd_step_moves_each_weight_by_minus_lr_times_its_gradient),
        cmocka_unit_test(a_nan_gradient_is_found_and_named),
        cmocka_unit_test(a_saved_state_loads_back_only_into_its_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
