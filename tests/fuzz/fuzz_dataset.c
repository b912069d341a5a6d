/* libFuzzer target: the dataset description a run keeps (RUN/dataset/:
 * meta, SPLIT.labels, SPLIT.paths), read back by every stage with
 * zp_dataset_read. The input is the five files in that order, each ended by
 * the line "@@@@\n" (the last may lack it). What reads back must hold what
 * it says: n labels, n paths. The seed corpus is a real run's description
 * and an image folder's (tests/fuzz/seeds/dataset).
 * Build and run: scripts/fuzz.sh [SECONDS]. */
#include "tests/fuzz/fuzz_rundir.h"
#include "pipeline/dataset/dataset.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const FILES[] = {"dataset/meta", "dataset/train.labels", "dataset/test.labels",
                                    "dataset/train.paths", "dataset/test.paths"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fuzz_rundir();
    size_t at = 0;
    for (int i = 0; i < 5; i++) {
        const uint8_t *mark = at < size ? memmem(data + at, size - at, "@@@@\n", 5) : NULL;
        size_t len = mark ? (size_t)(mark - data) - at : at < size ? size - at : 0;
        fuzz_put(FILES[i], data + at, len);
        at += len + (mark ? 5 : 0);
    }
    zp_dataset_t *ds = NULL;
    char err[4200] = "";
    int rc = zp_dataset_read(&ds, dir, err, sizeof err);
    fuzz_said_why(rc, err);
    if (!rc) { /* touch every label and path it says it has: ASan sees one past the end */
        volatile int64_t sum = 0;
        for (int s = 0; s < ZP_SPLITS; s++)
            for (int64_t i = 0; i < ds->split[s].n; i++)
                sum += (ds->split[s].label ? ds->split[s].label[i] : 0) +
                       (ds->split[s].path ? (int64_t)strlen(ds->split[s].path[i]) : 0);
        if (ds->meta.elems <= 0 || ds->meta.elems > ZP_MAX_ELEMS)
            abort();
    }
    zp_dataset_destroy(&ds);
    return 0;
}
