/* libFuzzer target: a .npy file as dataset.source: npy reads it
 * (pipeline/source/source_npy.c): the supervisor's probe of its header, then
 * a loader's source reading every sample of it (at most 64) from the mapped
 * file. What the probe passes must read back whole: each sample the rows'
 * bytes of the file, at the offset its header ends. The seed corpus is a
 * few numpy.save files (tests/fuzz/seeds/npy).
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#include "tests/fuzz/fuzz_rundir.h"
#include "pipeline/source/source.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static zp_config_t cfg;

/* The config of one split of one folder, made once. */
static void setup(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    char path[160], err[2048], text[512];
    snprintf(path, sizeof path, "%s/npy", fuzz_rundir());
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/npy/train", fuzz_rundir());
    mkdir(path, 0755);
    snprintf(text, sizeof text, "dataset: {source: npy, files: {train: [%s]}, fields: {x: x.npy}}\n",
             path);
    fuzz_put("npy.yaml", text, strlen(text));
    snprintf(path, sizeof path, "%s/npy.yaml", fuzz_rundir());
    if (zp_config_load(&cfg, path, NULL, 0, err, sizeof err) ||
        zp_source_config(&cfg, err, sizeof err)) {
        fprintf(stderr, "fuzz_npy: %s\n", err);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    fuzz_put("npy/train/x.npy", data, size);
    zp_dataset_t *ds = NULL;
    char err[4400] = "";
    int rc = zp_source_probe(&ds, &cfg, err, sizeof err);
    fuzz_said_why(rc, err);
    if (rc)
        return 0;
    const zp_dataset_meta_t *m = &ds->meta;
    size_t bytes = m->sample_bytes;
    if (m->fields.n != 1 || bytes != m->fields.f[0].bytes || !bytes ||
        (size_t)m->n[ZP_SPLIT_TRAIN] * bytes > size)
        abort(); /* passed, yet more rows than the file holds */
    zp_source_t *src = NULL;
    err[0] = 0;
    rc = zp_source_ops(cfg.dataset_source)->open(&src, &cfg, m, err, sizeof err);
    fuzz_said_why(rc, err);
    uint8_t *sample = malloc(bytes);
    if (!sample)
        abort();
    for (int64_t i = 0; !rc && i < m->n[ZP_SPLIT_TRAIN] && i < 64; i++) {
        int32_t label;
        err[0] = 0;
        rc = src->get(src, ZP_SPLIT_TRAIN, (uint32_t)i, sample, &label, err, sizeof err);
        fuzz_said_why(rc, err);
        if (!rc && memmem(data, size, sample, bytes) == NULL)
            abort(); /* a sample that is not bytes of the file */
    }
    free(sample);
    if (src)
        src->destroy(src);
    zp_dataset_destroy(&ds);
    return 0;
}
