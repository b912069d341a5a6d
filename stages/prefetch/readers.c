/* readers.c — a few threads that copy a batch's cache hits from LMDB into its
 * ring slot (cropping or decoding a whole image on the way). */
#define _GNU_SOURCE
#include "stages/prefetch/readers.h"
#include "pipeline/runtime/cachedb.h"
#include "pipeline/runtime/log.h"
#include "pipeline/runtime/resample.h"

#include <pthread.h>
#include <turbojpeg.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 16
#define AHEAD 6 /* values whose first lines are fetched ahead of the copy */

/* A thread's work space for whole images; owned by the pool. */
typedef struct {
    zp_resample_t rs;
    tjhandle tj;  /* made at the first JPEG */
    uint8_t *rgb; /* a decoded JPEG */
    size_t cap;
} space_t;

struct zp_readers {
    int n; /* threads, the caller included */
    int64_t busy_ns; /* copying, all threads, since the start (atomic adds) */
    space_t space[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    const zp_copy_job_t *job; /* guarded by mu */
    uint64_t seq;             /* job number; guarded by mu */
    int finished;             /* helpers done with job `seq`; guarded by mu */
    int stop;
};

typedef struct {
    zp_readers_t *r;
    int id;
} arg_t;

static arg_t g_args[MAX_THREADS];

/* The pixels of a checked JPEG image, decoded into the thread's space. NULL
 * with *why when it does not decode to the size its header says. */
static const uint8_t *decode(space_t *sp, const zp_cache_whole_t *img, const char **why)
{
    int w, h, sub, cs;
    size_t need = (size_t)img->w * img->h * 3;
    if (need > sp->cap) {
        uint8_t *p = realloc(sp->rgb, need);
        if (!p)
            return *why = "out of memory decoding a JPEG", NULL;
        sp->rgb = p, sp->cap = need;
    }
    if (!sp->tj && !(sp->tj = tjInitDecompress()))
        return *why = "out of memory decoding a JPEG", NULL;
    if (tjDecompressHeader3(sp->tj, img->payload, img->bytes, &w, &h, &sub, &cs) ||
        w != img->w || h != img->h ||
        tjDecompress2(sp->tj, img->payload, img->bytes, sp->rgb, w, 0, h, TJPF_RGB,
                      TJFLAG_ACCURATEDCT)) {
        tjDestroy(sp->tj); /* a failed decode leaves its state behind */
        sp->tj = NULL;
        return *why = "JPEG does not decode to the size its header says", NULL;
    }
    return sp->rgb;
}

/* Value j of the job, a whole image: the crop drawn for its sample, resized
 * into the slot at `dst`. ZP_HIT_OK or ZP_HIT_CORRUPT (why[j] says). */
static int crop_whole(const zp_copy_job_t *job, space_t *sp, int64_t j, uint32_t index,
                      int32_t *label, uint8_t *dst)
{
    zp_cache_whole_t img;
    int32_t l;
    if (zp_cachedb_check_whole(&job->vals[j], job->meta, job->side, index, &l, &img, &job->why[j]))
        return ZP_HIT_CORRUPT;
    const uint8_t *rgb = img.layout == ZP_CACHE_JPEG ? decode(sp, &img, &job->why[j]) : img.payload;
    if (!rgb)
        return ZP_HIT_CORRUPT;
    zp_aug_draw_t d;
    zp_augment_rrc_draw(job->rrc, job->epoch, index, img.h, img.w, &d);
    double box[4] = {d.box_x, d.box_y, d.box_w, d.box_h};
    int side = (int)job->meta->shape[1];
    if (zp_resample(&sp->rs, rgb, img.w, img.h, box, side, side, d.flip,
                    job->lut ? ZP_RS_CHW_F32 : ZP_RS_CHW_U8, job->lut, dst)) {
        job->why[j] = "out of memory resizing the crop";
        return ZP_HIT_CORRUPT;
    }
    *label = l;
    return ZP_HIT_OK;
}

/* Values [lo, hi) of the job: check the header, copy, checksum the copy
 * (whole images: crop_whole). */
static void copy_range(const zp_copy_job_t *job, space_t *sp, int64_t lo, int64_t hi)
{
    size_t bytes = job->meta->sample_bytes;
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
            job->status[j] = (uint8_t)crop_whole(job, sp, j, index, &job->labels[i], dst);
            continue;
        }
        job->status[j] = ZP_HIT_CORRUPT;
        if (zp_cachedb_check_header(&job->vals[j], job->meta, index, &job->labels[i], &payload, &sum,
                                  &job->why[j]))
            continue;
        memcpy(dst, payload, bytes);
        if (zp_cachedb_sum(job->vals[j].mv_data, dst, bytes) != sum) {
            job->why[j] = "checksum mismatch (header or payload)";
            continue;
        }
        job->status[j] = ZP_HIT_OK;
    }
}

/* copy_range on thread `id`'s space, its time added to the readers' busy time. */
static void timed_copy(zp_readers_t *r, const zp_copy_job_t *job, int id, int64_t lo, int64_t hi)
{
    int64_t t0 = zp_now_ns();
    copy_range(job, &r->space[id], lo, hi);
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
    uint64_t seen = 0;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->seq == seen)
            pthread_cond_wait(&r->go, &r->mu);
        if (r->stop)
            break;
        seen = r->seq;
        const zp_copy_job_t *job = r->job;
        pthread_mutex_unlock(&r->mu);
        int64_t lo, hi;
        share(job, a->id, r->n, &lo, &hi);
        timed_copy(r, job, a->id, lo, hi);
        pthread_mutex_lock(&r->mu);
        if (++r->finished == r->n - 1)
            pthread_cond_signal(&r->done);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int zp_readers_create(zp_readers_t **out, int nthreads)
{
    *out = NULL;
    zp_readers_t *r = calloc(1, sizeof *r);
    if (!r)
        return ZP_ENOMEM;
    r->n = nthreads < 1 ? 1 : nthreads > MAX_THREADS ? MAX_THREADS : nthreads;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->go, NULL);
    pthread_cond_init(&r->done, NULL);
    for (int i = 1; i < r->n; i++) {
        g_args[i] = (arg_t){r, i};
        if (pthread_create(&r->th[i], NULL, helper, &g_args[i])) {
            r->n = i; /* run with the threads we got */
            break;
        }
    }
    *out = r;
    return 0;
}

void zp_readers_run(zp_readers_t *r, const zp_copy_job_t *job)
{
    if (r->n == 1 || job->n < 2 * r->n) {
        timed_copy(r, job, 0, 0, job->n);
        return;
    }
    pthread_mutex_lock(&r->mu);
    r->job = job;
    r->finished = 0;
    r->seq++;
    pthread_cond_broadcast(&r->go);
    pthread_mutex_unlock(&r->mu);
    int64_t lo, hi;
    share(job, 0, r->n, &lo, &hi);
    timed_copy(r, job, 0, lo, hi);
    pthread_mutex_lock(&r->mu);
    while (r->finished < r->n - 1)
        pthread_cond_wait(&r->done, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

int zp_readers_count(const zp_readers_t *r) { return r->n; }

int64_t zp_readers_busy_ns(const zp_readers_t *r) { return __atomic_load_n(&r->busy_ns, __ATOMIC_RELAXED); }

void zp_readers_destroy(zp_readers_t **rp)
{
    if (!rp || !*rp)
        return;
    zp_readers_t *r = *rp;
    pthread_mutex_lock(&r->mu);
    r->stop = 1;
    pthread_cond_broadcast(&r->go);
    pthread_mutex_unlock(&r->mu);
    for (int i = 1; i < r->n; i++)
        pthread_join(r->th[i], NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->go);
    pthread_cond_destroy(&r->done);
    for (int i = 0; i < MAX_THREADS; i++) {
        zp_resample_free(&r->space[i].rs);
        free(r->space[i].rgb);
        if (r->space[i].tj)
            tjDestroy(r->space[i].tj);
    }
    free(r);
    *rp = NULL;
}
