/* scores.c — `zeus-pipe eval`'s scores: each test batch through every
 * checkpoint's model, with loss, accuracy, per-class accuracy and confusion
 * matrix, written as JSON and text. */
#define _GNU_SOURCE
#include "stages/trainer/scores.h"
#include "pipeline/base/json.h"
#include "pipeline/base/log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A checkpoint's payload is the trainer's: the best test accuracy (f64),
 * then zp_mlp_save()'s state. */
static int load_one(zp_scores_model_t *m, const char *dir, const int *dims, int nlayers,
                    int max_batch)
{
    char path[PATH_MAX + 80], err[600];
    snprintf(path, sizeof path, "%s/%s.ckpt", dir, m->name);
    void *payload = NULL;
    size_t bytes = 0;
    int rc = zp_mlp_init(&m->mlp, dims, nlayers, max_batch, 0);
    if (!rc && (rc = zp_ckpt_read(path, &m->pos, &payload, &bytes, err, sizeof err)))
        zp_error("cannot evaluate: %s", err);
    else if (!rc && (bytes < 8 || zp_mlp_load(&m->mlp, (uint8_t *)payload + 8, bytes - 8))) {
        zp_error("cannot evaluate %s: it holds another model than trainer.model.hidden describes",
                 path);
        rc = ZP_EINVAL;
    }
    free(payload);
    return rc;
}

int zp_scores_open(zp_scores_t *e, const char *names, const char *ckpt_dir, const int *dims,
                 int nlayers, int max_batch)
{
    memset(e, 0, sizeof *e);
    e->classes = dims[nlayers];
    int n = 1;
    for (const char *p = names; *p; p++)
        n += *p == ',';
    e->m = calloc((size_t)n, sizeof *e->m);
    e->pred = malloc((size_t)max_batch * sizeof *e->pred);
    if (!e->m || !e->pred)
        return ZP_ENOMEM;
    for (const char *p = names; *p;) {
        size_t len = strcspn(p, ",");
        zp_scores_model_t *m = &e->m[e->n++];
        snprintf(m->name, sizeof m->name, "%.*s", (int)len, p);
        m->confusion = calloc((size_t)e->classes * (size_t)e->classes, sizeof *m->confusion);
        if (!m->confusion)
            return ZP_ENOMEM;
        int rc = load_one(m, ckpt_dir, dims, nlayers, max_batch);
        if (rc)
            return rc;
        p += len + (p[len] == ',');
    }
    return e->n ? 0 : ZP_EINVAL;
}

void zp_scores_batch(zp_scores_t *e, const float *x, const int32_t *labels, int n)
{
    for (int k = 0; k < e->n; k++) {
        zp_scores_model_t *m = &e->m[k];
        int correct;
        m->loss_sum += zp_mlp_forward(&m->mlp, x, labels, n, &correct) * n;
        m->correct += correct;
        m->n += n;
        zp_mlp_predict(&m->mlp, n, e->pred);
        for (int i = 0; i < n; i++)
            if (labels[i] >= 0 && labels[i] < e->classes)
                m->confusion[(size_t)labels[i] * (size_t)e->classes + (size_t)e->pred[i]]++;
    }
}

static double class_accuracy(const zp_scores_t *e, const zp_scores_model_t *m, int c, int64_t *total)
{
    *total = 0;
    for (int j = 0; j < e->classes; j++)
        *total += m->confusion[(size_t)c * (size_t)e->classes + (size_t)j];
    return *total ? (double)m->confusion[(size_t)c * (size_t)e->classes + (size_t)c] / (double)*total : 0;
}

static void write_json(const zp_scores_t *e, const zp_scores_model_t *m, FILE *f)
{
    fprintf(f, "{\"checkpoint\":");
    zp_json_str(f, m->name); /* a file name in checkpoints/ */
    fprintf(f, ",\"epoch\":%llu,\"batch\":%llu,\"step\":%llu,\"samples\":%lld,"
               "\"loss\":%.9g,\"accuracy\":%.9g,\"per_class_accuracy\":[",
            (unsigned long long)m->pos.epoch, (unsigned long long)m->pos.batch,
            (unsigned long long)m->pos.step, (long long)m->n, m->n ? m->loss_sum / m->n : 0,
            m->n ? (double)m->correct / m->n : 0);
    int64_t total;
    for (int c = 0; c < e->classes; c++)
        fprintf(f, "%s%.9g", c ? "," : "", class_accuracy(e, m, c, &total));
    fprintf(f, "],\"confusion\":[");
    for (int c = 0; c < e->classes; c++) {
        fprintf(f, "%s[", c ? "," : "");
        for (int j = 0; j < e->classes; j++)
            fprintf(f, "%s%lld", j ? "," : "", (long long)m->confusion[(size_t)c * e->classes + j]);
        fputc(']', f);
    }
    fprintf(f, "]}\n");
}

static void write_text(const zp_scores_t *e, const zp_scores_model_t *m, FILE *f)
{
    if (m->pos.batch == 0)
        fprintf(f, "checkpoint %s (after epoch %llu, step %llu): %lld test samples\n", m->name,
                (unsigned long long)m->pos.epoch, (unsigned long long)m->pos.step, (long long)m->n);
    else
        fprintf(f, "checkpoint %s (epoch %llu after batch %llu, step %llu): %lld test samples\n",
                m->name, (unsigned long long)m->pos.epoch + 1, (unsigned long long)m->pos.batch,
                (unsigned long long)m->pos.step, (long long)m->n);
    fprintf(f, "loss %.4f  accuracy %.4f\n\n", m->n ? m->loss_sum / m->n : 0,
            m->n ? (double)m->correct / m->n : 0);
    fprintf(f, "%5s %8s %7s   confusion (rows: true class, columns: predicted)\n", "class",
            "accuracy", "samples");
    int64_t total;
    for (int c = 0; c < e->classes; c++) {
        double acc = class_accuracy(e, m, c, &total);
        fprintf(f, "%5d %8.4f %7lld  ", c, acc, (long long)total);
        for (int j = 0; j < e->classes; j++)
            fprintf(f, " %5lld", (long long)m->confusion[(size_t)c * e->classes + j]);
        fputc('\n', f);
    }
}

int zp_scores_write(const zp_scores_t *e, const char *dir)
{
    for (int k = 0; k < e->n; k++) {
        char path[PATH_MAX + 96];
        for (int text = 0; text < 2; text++) {
            snprintf(path, sizeof path, "%s/eval-%s.%s", dir, e->m[k].name, text ? "txt" : "json");
            FILE *f = fopen(path, "w");
            if (!f) {
                zp_error("%s: %s", path, strerror(errno));
                return -errno;
            }
            (text ? write_text : write_json)(e, &e->m[k], f);
            if (fclose(f)) {
                zp_error("%s: %s", path, strerror(errno));
                return -errno;
            }
        }
        zp_info("%s: test loss %.4f, accuracy %.4f over %lld samples", e->m[k].name,
                e->m[k].n ? e->m[k].loss_sum / e->m[k].n : 0,
                e->m[k].n ? (double)e->m[k].correct / e->m[k].n : 0, (long long)e->m[k].n);
    }
    return 0;
}

void zp_scores_close(zp_scores_t *e)
{
    for (int k = 0; e->m && k < e->n; k++) {
        zp_mlp_free(&e->m[k].mlp);
        free(e->m[k].confusion);
    }
    free(e->m);
    free(e->pred);
    memset(e, 0, sizeof *e);
}
