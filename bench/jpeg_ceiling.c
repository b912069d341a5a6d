/* jpeg_ceiling.c — the ceiling a loader process is measured against: the
 * image source's get() (read the file, TurboJPEG decode, bilinear resize,
 * center crop, HWC -> CHW; pipeline/source/source_image.c, the very code a
 * loader runs) called directly on one core for every train image, with no
 * process, socket or cache in the way.
 *
 * Pass 0 reads every file once (untimed: it fills the page cache and checks
 * that every image loads); passes 1..N are timed, so the rate is decode work,
 * not disk. With --parts it also times, each over one pass, for where the
 * time goes: the file reads alone, TurboJPEG's decode alone (at the DCT scale
 * get() picks), and the uint8 -> float32 normalisation the loader does after
 * get() (a copy of loader.c's lookup table loop).
 *
 * usage: zp-bench-jpeg CONFIG [--passes N] [--parts] [KEY=VALUE ...]   prints one JSON object */
#define _GNU_SOURCE
#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"
#include "pipeline/dataset/imagelist.h"
#include "pipeline/base/log.h"
#include "pipeline/source/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One pass of get() over the train split; images/s, or -1 with a message. */
static double get_pass(zp_source_t *src, int64_t n, uint8_t *px)
{
    char err[700];
    int32_t label;
    double t0 = now();
    for (int64_t i = 0; i < n; i++) {
        int rc = src->get(src, ZP_SPLIT_TRAIN, (uint32_t)i, px, &label, err, sizeof err);
        if (rc) {
            fprintf(stderr, "zp-bench-jpeg: sample %lld: %s (%s)\n", (long long)i, err, zp_strerror(rc));
            return -1;
        }
    }
    return (double)n / (now() - t0);
}

/* Reads `path` whole into *buf; its size, or 0 when it cannot be read. */
static size_t slurp(const char *path, uint8_t **buf, size_t *cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    size_t n = 0;
    if (!fseek(f, 0, SEEK_END) && (n = (size_t)ftell(f)) > 0 && n <= (256u << 20) && !fseek(f, 0, SEEK_SET)) {
        if (n > *cap && !(*buf = realloc(*buf, *cap = n)))
            n = 0;
        else if (fread(*buf, 1, n, f) != n)
            n = 0;
    }
    fclose(f);
    return n;
}

/* The file reads alone and TurboJPEG's decode alone (same DCT scaling rule as
 * get(): the smallest factor that keeps the shorter side >= resize, used only
 * when the source is at least twice the target), each images/s over one pass. */
static int breakdown(const zp_imagelist_t *l, int resize, double *read_rate, double *decode_rate)
{
    uint8_t *file = NULL, *rgb = NULL;
    size_t cap = 0, rgb_cap = 0;
    int rc = 1, nf, jpegs = 0;
    tjhandle tj = tjInitDecompress();
    tjscalingfactor *f = tjGetScalingFactors(&nf);
    double t0 = now(), dt = 0;
    for (int64_t i = 0; i < l->n; i++)
        if (!slurp(l->path[i], &file, &cap)) {
            fprintf(stderr, "zp-bench-jpeg: %s: cannot be read\n", l->path[i]);
            goto out;
        }
    *read_rate = (double)l->n / (now() - t0);
    for (int64_t i = 0; tj && i < l->n; i++) {
        size_t size = slurp(l->path[i], &file, &cap);
        int w, h, sub, cs;
        if (tjDecompressHeader3(tj, file, size, &w, &h, &sub, &cs))
            continue; /* not a JPEG (a PNG): left out of this figure */
        tjscalingfactor best = {1, 1};
        int shorter = w < h ? w : h;
        for (int k = 0; resize > 0 && 2 * resize <= shorter && k < nf; k++)
            if (TJSCALED(shorter, f[k]) >= resize && f[k].num * best.denom < best.num * f[k].denom)
                best = f[k];
        int sw = TJSCALED(w, best), sh = TJSCALED(h, best);
        size_t need = (size_t)sw * sh * 4;
        if (need > rgb_cap) {
            free(rgb);
            if (!(rgb = malloc(rgb_cap = need))) {
                fprintf(stderr, "zp-bench-jpeg: out of memory (%zu bytes for %s)\n", need, l->path[i]);
                goto out;
            }
        }
        double t1 = now();
        tjDecompress2(tj, file, size, rgb, sw, 0, sh, cs == TJCS_CMYK || cs == TJCS_YCCK ? TJPF_CMYK : TJPF_RGB,
                      TJFLAG_ACCURATEDCT);
        dt += now() - t1;
        jpegs++;
    }
    *decode_rate = jpegs ? jpegs / dt : 0;
    rc = 0;
out:
    if (tj)
        tjDestroy(tj);
    free(file), free(rgb);
    return rc;
}

/* The loader's transform for float32 samples (the trainer's for uint8 ones). */
static double normalize_rate(const zp_config_t *c, const zp_dataset_meta_t *m, const uint8_t *px)
{
    float *lut = zp_dataset_normalize_lut(c, m->shape[0]);
    int64_t reps = 2000;
    float *out = malloc((size_t)m->elems * sizeof *out);
    double t0 = now();
    for (int64_t r = 0; r < reps; r++)
        zp_dataset_normalize(lut, m, px, out);
    double rate = (double)reps / (now() - t0);
    volatile float sink = out[m->elems / 2];
    (void)sink;
    free(out);
    free(lut);
    return rate;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s CONFIG [--passes N] [--parts] [KEY=VALUE ...]\n", argv[0]);
        return 2;
    }
    int passes = 3, parts = 0, first = 2;
    for (; first < argc && argv[first][0] == '-'; first++) {
        if (!strcmp(argv[first], "--parts")) {
            parts = 1;
        } else if (!strcmp(argv[first], "--passes") && first + 1 < argc) {
            passes = atoi(argv[++first]);
            if (passes < 1 || passes > 100) {
                fprintf(stderr, "zp-bench-jpeg: --passes must be 1..100 (got %s)\n", argv[first]);
                return 2;
            }
        } else {
            fprintf(stderr, "zp-bench-jpeg: unknown option %s\n", argv[first]);
            return 2;
        }
    }
    static zp_config_t cfg;
    zp_dataset_meta_t meta;
    zp_source_t *src = NULL;
    zp_imagelist_t list = {0};
    char err[1024], where[600];
    if (zp_config_load(&cfg, argv[1], argv + first, argc - first, err, sizeof err) ||
        zp_source_config(&cfg, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    if (cfg.dataset_source != ZP_SOURCE_IMAGE_FOLDER && cfg.dataset_source != ZP_SOURCE_IMAGE_LIST) {
        fprintf(stderr, "zp-bench-jpeg: %s: dataset.source must be image_folder or image_list\n", argv[1]);
        return 2;
    }
    zp_dataset_file(&cfg, cfg.image_train, where, sizeof where);
    int rc = zp_source_probe_meta(&cfg, &meta, err, sizeof err);
    if (!rc)
        rc = zp_source_ops(cfg.dataset_source)->open(&src, &cfg, &meta, err, sizeof err);
    if (!rc)
        rc = zp_imagelist_read(where, cfg.dataset_source == ZP_SOURCE_IMAGE_LIST, &list, err, sizeof err);
    if (rc) {
        fprintf(stderr, "zp-bench-jpeg: %s\n", err);
        return 1;
    }
    int64_t n = meta.n[ZP_SPLIT_TRAIN];
    uint8_t *px = malloc((size_t)meta.elems);
    double *rates = calloc((size_t)passes + 1, sizeof *rates), read_rate = 0, decode_rate = 0;
    for (int p = 0; p <= passes && !rc; p++) /* pass 0 fills the page cache */
        if ((rates[p] = get_pass(src, n, px)) < 0)
            rc = 1;
    if (!rc && parts)
        rc = breakdown(&list, (int)cfg.image_resize, &read_rate, &decode_rate);
    if (!rc) {
        qsort(rates + 1, (size_t)passes, sizeof *rates, cmp_double);
        printf("{\"images\":%lld,\"bytes\":%lld,\"passes\":%d,\"get_per_s\":%.1f,\"get_per_s_median\":%.1f,"
               "\"get_per_s_all\":[",
               (long long)n, (long long)list.bytes, passes, rates[passes], rates[1 + passes / 2]);
        for (int p = 1; p <= passes; p++)
            printf("%s%.1f", p > 1 ? "," : "", rates[p]);
        printf("],\"cold_pass_per_s\":%.1f,\"read_per_s\":%.1f,\"decode_per_s\":%.1f,\"normalize_per_s\":%.1f}\n",
               rates[0], read_rate, decode_rate, parts ? normalize_rate(&cfg, &meta, px) : 0.0);
    }
    src->destroy(src);
    zp_imagelist_free(&list);
    free(px), free(rates);
    return rc;
}
