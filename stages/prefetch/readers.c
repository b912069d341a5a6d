/* readers.c — a few threads that read a batch's cache hits from LMDB into its
 * ring slot (cropping or decoding a whole image on the way). */
#define _GNU_SOURCE
#include "stages/prefetch/readers.h"
#include "pipeline/base/buf.h"
#include "pipeline/cachedb/cachedb.h"
#include "pipeline/base/log.h"
#include "pipeline/image/jpeg_region.h"
#include "pipeline/image/resample.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <turbojpeg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 16
#define AHEAD 6 /* values whose first lines are fetched ahead of the copy */
#define SHARE_BYTES (512 << 10) /* a thread's least share of a batch of samples */

/* A thread's read transaction and work space for whole images; owned by the pool. */
typedef struct {
    zp_resample_t rs;
    tjhandle tj;  /* made at the first JPEG: its header */
    zp_jpeg_region_t *jr; /* ... and the part of it that the crop reads */
    uint8_t *rgb; /* a decoded part of a JPEG */
    size_t cap;
    MDB_txn *txn; /* the thread's read transaction, reset between jobs; NULL until the first */
    zp_augment_field_space_t fsp; /* a Python Dataset's field augmented */
} space_t;

typedef struct {
    zp_readers_t *r;
    int id;
} arg_t;

/* The caller posts go[i] for each helper a job needs; the last helper done
 * posts done. */
struct zp_readers {
    int n; /* threads, the caller included */
    int64_t busy_ns; /* reading, all threads, since the start (atomic adds) */
    space_t space[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    arg_t args[MAX_THREADS];
    sem_t go[MAX_THREADS], done;
    zp_copy_job_t *job; /* the job, and the threads on it (the caller's included) */
    int active;
    int finished; /* helpers done with the job (atomic) */
    int stop;     /* atomic */
};

/* The pixels that the resize of `box` (to side x side) reads of a checked
 * JPEG image, decoded into the thread's space: only that part of the image
 * (jpeg_region.h), or the whole where the region decoder will not promise
 * the whole decode's pixels, in a region of *rw x *rh pixels at (*rx, *ry).
 * NULL with *why when it does not decode to the size its header says. */
static const uint8_t *decode(space_t *sp, const zp_cache_whole_t *img, const double box[4], int side,
                             int *rx, int *ry, int *rw, int *rh, const char **why)
{
    int w, h, sub, cs, x0, y0, x1, y1;
    if (!sp->tj && !(sp->tj = tjInitDecompress()))
        return *why = "out of memory decoding a JPEG", NULL;
    if (!sp->jr && !(sp->jr = zp_jpeg_region_open()))
        return *why = "out of memory decoding a JPEG", NULL;
    if (tjDecompressHeader3(sp->tj, img->payload, img->bytes, &w, &h, &sub, &cs)) {
        tjDestroy(sp->tj); /* a failed call leaves its state behind */
        sp->tj = NULL;
        return *why = "JPEG does not decode", NULL;
    }
    if (w != img->w || h != img->h)
        return *why = "JPEG does not decode to the size its header says", NULL;
    zp_resample_reach(box, side, side, w, h, &x0, &y0, &x1, &y1);
    int rc = zp_jpeg_region(sp->jr, img->payload, img->bytes, 1, 1, x0, y0, x1, y1, &sp->rgb, &sp->cap,
                            rx, ry, rw, rh);
    if (rc == ZP_ENOMEM)
        return *why = "out of memory decoding a JPEG", NULL;
    if (!rc)
        return sp->rgb;
    /* one the region decoder leaves alone (a small image, say): decoded whole */
    if (zp_buf_grow(&sp->rgb, &sp->cap, (size_t)w * (size_t)h * 3))
        return *why = "out of memory decoding a JPEG", NULL;
    if (tjDecompress2(sp->tj, img->payload, img->bytes, sp->rgb, w, 0, h, TJPF_RGB,
                      TJFLAG_ACCURATEDCT)) {
        tjDestroy(sp->tj);
        sp->tj = NULL;
        return *why = "JPEG does not decode", NULL;
    }
    *rx = *ry = 0, *rw = w, *rh = h;
    return sp->rgb;
}

/* Value j of the job, a whole image: the crop drawn for its sample, resized
 * into the slot at `dst`. ZP_HIT_OK or ZP_HIT_CORRUPT (why[j] says). */
static int crop_whole(const zp_copy_job_t *job, space_t *sp, int64_t j, uint32_t index,
                      int64_t pos, int32_t *label, uint8_t *dst)
{
    zp_cache_whole_t img;
    int32_t l;
    if (zp_cachedb_check_whole(&job->vals[j], job->meta, job->fp, job->side, index, &l, &img,
                               &job->why[j]))
        return ZP_HIT_CORRUPT;
    zp_aug_draw_t d;
    zp_augment_rrc_draw(job->rrc, job->epoch, index, img.h, img.w, &d);
    double box[4] = {d.box_x, d.box_y, d.box_w, d.box_h};
    int side = (int)job->meta->shape[1], x = 0, y = 0, w = img.w, h = img.h;
    const uint8_t *rgb = img.payload;
    if (img.layout == ZP_CACHE_JPEG && !(rgb = decode(sp, &img, box, side, &x, &y, &w, &h, &job->why[j])))
        return ZP_HIT_CORRUPT;
    box[0] -= x, box[1] -= y;
    job->crops[pos] = zp_augment_crop_of(&d, img.w, img.h);
    if (zp_resample(&sp->rs, rgb, w, h, box, side, side, d.flip, job->lut ? ZP_RS_CHW_F32 : ZP_RS_CHW_U8,
                    job->lut, dst)) {
        job->why[j] = "out of memory resizing the crop";
        return ZP_HIT_CORRUPT;
    }
    *label = l;
    return ZP_HIT_OK;
}

/* Value j of the job, a record __getitem__ returned: the sample made of it
 * with the built-in ops on its field (augment_field.h) into the slot at
 * `dst`. ZP_HIT_OK or ZP_HIT_CORRUPT (why[j] says). */
static int augment_record(const zp_copy_job_t *job, space_t *sp, int64_t j, uint32_t index,
                          int64_t pos, int32_t *label, uint8_t *dst)
{
    const uint8_t *payload;
    if (zp_cachedb_check_value(&job->vals[j], job->kept, job->fp, index, label, &payload,
                               &job->why[j]))
        return ZP_HIT_CORRUPT;
    zp_crop_t c;
    if (zp_augment_field_make(job->field, &sp->fsp, job->split, job->epoch, index, payload, dst, &c)) {
        job->why[j] = "out of memory augmenting the field";
        return ZP_HIT_CORRUPT;
    }
    if (job->split == ZP_SPLIT_TRAIN)
        job->crops[pos] = c;
    return ZP_HIT_OK;
}

/* An LMDB failure of this job: the first one is kept for the prefetch to report. */
static void lmdb_failed(zp_copy_job_t *job, const char *what, int rc)
{
    int none = 0;
    if (__atomic_compare_exchange_n(&job->lmdb_rc, &none, rc, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        job->lmdb_what = what;
}

/* Starts the thread's read transaction: renews its handle, or begins one.
 * The calling thread's (`adopt`) may adopt a map another process grew, as no
 * helper holds a transaction then; a start that may not adopt fails with
 * MDB_MAP_RESIZED instead, its share is fetched from the loaders, and the
 * next job's first start adopts the map. */
static int txn_start(space_t *sp, zp_cachedb_t *db, int adopt)
{
    if (sp->txn) {
        int rc = mdb_txn_renew(sp->txn);
        if (!rc)
            return 0;
        mdb_txn_abort(sp->txn);
        sp->txn = NULL;
    }
    if (adopt)
        return zp_cachedb_read_begin(db, &sp->txn);
    int rc = mdb_txn_begin(db->env, NULL, MDB_RDONLY, &sp->txn);
    if (rc)
        sp->txn = NULL;
    return rc;
}

/* Looks values [lo, hi) of the job up in the thread's transaction, in key
 * order (nearby keys share B-tree pages); the tree walk touches no value page. */
static void lookup(zp_copy_job_t *job, space_t *sp, int64_t lo, int64_t hi, int adopt)
{
    int rc = txn_start(sp, job->db, adopt);
    if (rc && rc != MDB_MAP_RESIZED) /* grown since the job began: the next job adopts it */
        lmdb_failed(job, "cannot begin a read transaction", rc);
    for (int64_t j = lo; j < hi; j++) {
        uint8_t kb[4];
        zp_cachedb_key((uint32_t)(job->order[j] >> 32), kb);
        MDB_val k = {4, kb};
        int got = rc ? rc : mdb_get(sp->txn, job->dbi, &k, &job->vals[j]);
        if (got)
            job->vals[j].mv_data = NULL;
        if (got && !rc && got != MDB_NOTFOUND)
            lmdb_failed(job, "get", got);
    }
}

/* Values [lo, hi) of the job: look them up, then check the header, copy and
 * checksum the copy (whole images: crop_whole), with the pages of the next
 * few values already on their way: value pages are scattered across the map,
 * and their cache and TLB misses overlap instead of queueing. */
static void copy_range(zp_copy_job_t *job, space_t *sp, int64_t lo, int64_t hi, int adopt)
{
    size_t bytes = job->meta->sample_bytes;
    lookup(job, sp, lo, hi, adopt);
    for (int64_t j = lo; j < hi; j++) {
        int64_t a = j + AHEAD;
        if (a < hi && job->vals[a].mv_data) {
            __builtin_prefetch(job->vals[a].mv_data);
            __builtin_prefetch((const uint8_t *)job->vals[a].mv_data + 64);
        }
        if (!job->vals[j].mv_data) {
            job->status[j] = ZP_HIT_ABSENT;
            continue;
        }
        uint32_t index = (uint32_t)(job->order[j] >> 32);
        int64_t i = (int64_t)(job->order[j] & 0xffffffffu);
        const uint8_t *payload;
        uint64_t sum;
        uint8_t *dst = job->data + (size_t)i * bytes;
        if (job->rrc) {
            job->status[j] = (uint8_t)crop_whole(job, sp, j, index, i, &job->labels[i], dst);
            continue;
        }
        if (job->field) {
            job->status[j] = (uint8_t)augment_record(job, sp, j, index, i, &job->labels[i], dst);
            continue;
        }
        job->status[j] = ZP_HIT_CORRUPT;
        if (zp_cachedb_check_header(&job->vals[j], job->meta, job->fp, index, &job->labels[i],
                                    &payload, &sum, &job->why[j]))
            continue;
        memcpy(dst, payload, bytes);
        if (zp_cachedb_sum(job->vals[j].mv_data, dst, bytes) != sum) {
            job->why[j] = "checksum mismatch (header or payload)";
            continue;
        }
        job->status[j] = ZP_HIT_OK;
    }
    if (sp->txn)
        mdb_txn_reset(sp->txn); /* the values' pointers are not used past here */
}

/* copy_range on thread `id`'s space, its time added to the readers' busy time. */
static void timed_copy(zp_readers_t *r, zp_copy_job_t *job, int id, int64_t lo, int64_t hi,
                       int adopt)
{
    int64_t t0 = zp_now_ns();
    copy_range(job, &r->space[id], lo, hi, adopt);
    __atomic_add_fetch(&r->busy_ns, zp_now_ns() - t0, __ATOMIC_RELAXED);
}

static void share(const zp_copy_job_t *job, int id, int n, int64_t *lo, int64_t *hi)
{
    *lo = job->n * id / n;
    *hi = job->n * (id + 1) / n;
}

static void *helper(void *p)
{
    arg_t *a = p;
    zp_readers_t *r = a->r;
    for (;;) {
        while (sem_wait(&r->go[a->id]) && errno == EINTR)
            ;
        if (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
            /* in this thread: its reader slot is this thread's (LMDB's
             * thread-local slots), freed as the thread exits */
            if (r->space[a->id].txn)
                mdb_txn_abort(r->space[a->id].txn);
            r->space[a->id].txn = NULL;
            return NULL;
        }
        /* the job's, read once: the caller sets the next job's as soon as
         * the last helper has posted done, which may be before this one's
         * count is compared */
        zp_copy_job_t *job = r->job;
        int active = r->active;
        int64_t lo, hi;
        share(job, a->id, active, &lo, &hi);
        timed_copy(r, job, a->id, lo, hi, 0);
        if (__atomic_add_fetch(&r->finished, 1, __ATOMIC_ACQ_REL) == active - 1)
            sem_post(&r->done);
    }
}

int zp_readers_create(zp_readers_t **out, int nthreads)
{
    *out = NULL;
    zp_readers_t *r = calloc(1, sizeof *r);
    if (!r)
        return ZP_ENOMEM;
    r->n = nthreads < 1 ? 1 : nthreads > MAX_THREADS ? MAX_THREADS : nthreads;
    sem_init(&r->done, 0, 0);
    for (int i = 1; i < r->n; i++) {
        r->args[i] = (arg_t){r, i};
        sem_init(&r->go[i], 0, 0);
        if (pthread_create(&r->th[i], NULL, helper, &r->args[i])) {
            sem_destroy(&r->go[i]);
            r->n = i; /* run with the threads we got */
            break;
        }
    }
    *out = r;
    return 0;
}

/* The threads a job is worth: every one for whole images and augmented
 * fields (a crop or a decode costs far more than a wake-up); for samples, one
 * per SHARE_BYTES of copy, as
 * waking a helper costs about what copying a few hundred KiB does. */
static int threads_for(const zp_readers_t *r, const zp_copy_job_t *job)
{
    int64_t k = job->rrc || job->field ? r->n : job->n * (int64_t)job->meta->sample_bytes / SHARE_BYTES;
    if (k > job->n / 2)
        k = job->n / 2; /* two values a thread at least */
    return k < 1 ? 1 : k > r->n ? r->n : (int)k;
}

void zp_readers_run(zp_readers_t *r, zp_copy_job_t *job)
{
    job->lmdb_rc = 0;
    job->lmdb_what = NULL;
    int k = threads_for(r, job);
    if (k == 1) {
        timed_copy(r, job, 0, 0, job->n, 1);
        return;
    }
    /* The caller's transaction first: a grown map is adopted while no helper
     * holds a transaction; its share's lookup renews it without adopting. */
    space_t *sp = &r->space[0];
    if (!txn_start(sp, job->db, 1))
        mdb_txn_reset(sp->txn);
    r->job = job;
    r->active = k;
    __atomic_store_n(&r->finished, 0, __ATOMIC_RELEASE);
    for (int i = 1; i < k; i++)
        sem_post(&r->go[i]); /* publishes job and active */
    int64_t lo, hi;
    share(job, 0, k, &lo, &hi);
    timed_copy(r, job, 0, lo, hi, 0);
    while (sem_wait(&r->done) && errno == EINTR)
        ;
}

int zp_readers_count(const zp_readers_t *r) { return r->n; }

int64_t zp_readers_busy_ns(const zp_readers_t *r) { return __atomic_load_n(&r->busy_ns, __ATOMIC_RELAXED); }

void zp_readers_destroy(zp_readers_t **rp)
{
    if (!rp || !*rp)
        return;
    zp_readers_t *r = *rp;
    __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
    for (int i = 1; i < r->n; i++) {
        sem_post(&r->go[i]);
        pthread_join(r->th[i], NULL);
        sem_destroy(&r->go[i]);
    }
    sem_destroy(&r->done);
    if (r->space[0].txn) /* the calling thread's; the helpers ended theirs */
        mdb_txn_abort(r->space[0].txn);
    for (int i = 0; i < MAX_THREADS; i++) {
        zp_resample_free(&r->space[i].rs);
        zp_augment_field_space_free(&r->space[i].fsp);
        free(r->space[i].rgb);
        if (r->space[i].tj)
            tjDestroy(r->space[i].tj);
        zp_jpeg_region_close(r->space[i].jr);
    }
    free(r);
    *rp = NULL;
}
