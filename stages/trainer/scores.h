/* scores.h — `zeus-pipe eval`: the test split through several checkpoints of
 * a run at once (the data is read once; each batch goes through every
 * model), with loss, accuracy, per-class accuracy and the confusion matrix
 * of each. */
#ifndef ZP_SCORES_H
#define ZP_SCORES_H

#include "pipeline/stage/ckpt.h"
#include "stages/trainer/mlp.h"

typedef struct {
    char name[64]; /* "best", "last", "epoch-3" */
    zp_ckpt_pos_t pos;
    zp_mlp_t mlp;
    double loss_sum;
    int64_t n, correct;
    int64_t *confusion; /* classes x classes, [true][predicted]; owned */
} zp_scores_model_t;

typedef struct {
    int n, classes;
    zp_scores_model_t *m; /* owned */
    int32_t *pred;      /* max_batch predictions; owned */
} zp_scores_t;

/* Loads every checkpoint named in `names` (comma-separated) from ckpt_dir
 * into a model of the given shape. Errors are logged with the file's path. */
int zp_scores_open(zp_scores_t *e, const char *names, const char *ckpt_dir, const int *dims,
                 int nlayers, int max_batch);
/* One test batch through every model. */
void zp_scores_batch(zp_scores_t *e, const float *x, const int32_t *labels, int n);
/* Writes <dir>/eval-<name>.json and eval-<name>.txt for every model. */
int zp_scores_write(const zp_scores_t *e, const char *dir);
void zp_scores_close(zp_scores_t *e);

#endif
