/* batch.c — one batch's assembly into its ring slot (batch.h). */
#include "stages/prefetch/batch.h"
#include "schemas/errors.h"

#include <stdlib.h>
#include <string.h>

static void close_held(zp_held_t *h)
{
    zmq_msg_close(&h->labels);
    zmq_msg_close(&h->data);
    zmq_msg_close(&h->crops);
}

int zp_batch_create(zp_batch_t **out, size_t batch_size)
{
    zp_batch_t *bt = calloc(1, sizeof *bt);
    if (bt) {
        bt->batch = -1;
        bt->slot = -1;
        bt->have = malloc(batch_size);
        bt->cached = malloc(batch_size);
        bt->fetch.pos = malloc(batch_size * 4);
        bt->late.pos = malloc(batch_size * 4);
    }
    if (!bt || !bt->have || !bt->cached || !bt->fetch.pos || !bt->late.pos) {
        zp_batch_destroy(&bt);
        *out = NULL;
        return ZP_ENOMEM;
    }
    *out = bt;
    return 0;
}

void zp_batch_destroy(zp_batch_t **btp)
{
    zp_batch_t *bt = btp ? *btp : NULL;
    if (!bt)
        return;
    for (int h = 0; h < bt->nheld; h++)
        close_held(&bt->held[h]);
    free(bt->held);
    free(bt->have);
    free(bt->cached);
    free(bt->fetch.pos);
    free(bt->late.pos);
    free(bt);
    *btp = NULL;
}

void zp_batch_start(zp_batch_t *bt, int64_t batch, const uint32_t *indices, int64_t n)
{
    bt->batch = batch;
    bt->indices = indices;
    bt->n = n;
    bt->filled = bt->skipped = 0;
    bt->slot = -1;
    bt->fetch.id = bt->late.id = 0;
    bt->fetch.n = bt->late.n = 0;
    memset(bt->have, 0, (size_t)n);
}

void zp_batch_abandon(zp_batch_t *bt)
{
    for (int h = 0; h < bt->nheld; h++)
        close_held(&bt->held[h]);
    bt->nheld = 0;
    bt->batch = -1;
    bt->slot = -1;
    bt->fetch.id = bt->late.id = 0;
    bt->fetch.n = bt->late.n = 0;
}

void zp_batch_copy_in(zp_batch_t *bt, const zp_slot_view_t *v, const zp_fetch_t *f,
                      uint64_t offset, uint64_t n, const uint8_t *labels, const uint8_t *data,
                      const uint8_t *crops)
{
    size_t bytes = v->sample_bytes;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t at = f->pos[offset + i];
        if (bt->have[at])
            continue; /* a duplicate; the first copy stands */
        bt->have[at] = 1;
        bt->filled++;
        memcpy(&v->labels[at], labels + 4 * i, 4); /* frames may be unaligned */
        if (crops)
            memcpy(&v->crops[at], crops + i * sizeof(zp_crop_t), sizeof(zp_crop_t));
        else
            v->crops[at] = (zp_crop_t){.x = -1};
        if (v->labels[at] == ZP_LABEL_SKIPPED) {
            bt->have[at] = 2;
            bt->skipped++;
            continue;
        }
        memcpy(v->data + at * bytes, data + i * bytes, bytes);
    }
}

int zp_batch_hold(zp_batch_t *bt, const zp_msg_t *m, zp_frames_t *f)
{
    if (bt->nheld == bt->held_cap) {
        int cap = bt->held_cap ? bt->held_cap * 2 : 8;
        zp_held_t *h = realloc(bt->held, (size_t)cap * sizeof *h);
        if (!h)
            return ZP_ENOMEM;
        bt->held = h;
        bt->held_cap = cap;
    }
    zp_held_t *h = &bt->held[bt->nheld++];
    h->offset = m->offset;
    h->n = m->n;
    zmq_msg_init(&h->labels);
    zmq_msg_init(&h->data);
    zmq_msg_init(&h->crops);
    zmq_msg_move(&h->labels, &f->part[2]);
    zmq_msg_move(&h->data, &f->part[3]);
    if (m->nframes > 4)
        zmq_msg_move(&h->crops, &f->part[4]);
    return 0;
}

void zp_batch_copy_held(zp_batch_t *bt, const zp_slot_view_t *v)
{
    for (int i = 0; i < bt->nheld; i++) {
        zp_held_t *h = &bt->held[i];
        zp_batch_copy_in(bt, v, &bt->fetch, h->offset, h->n, zmq_msg_data(&h->labels),
                         zmq_msg_data(&h->data),
                         zmq_msg_size(&h->crops) ? zmq_msg_data(&h->crops) : NULL);
        close_held(h);
    }
    bt->nheld = 0;
}

int64_t zp_batch_compact(zp_batch_t *bt, const zp_slot_view_t *v)
{
    size_t bytes = v->sample_bytes;
    int64_t k = 0;
    for (int64_t i = 0; i < bt->n; i++) {
        if (bt->have[i] == 2)
            continue;
        if (k != i) {
            v->indices[k] = v->indices[i];
            v->labels[k] = v->labels[i];
            v->crops[k] = v->crops[i];
            memmove(v->data + (size_t)k * bytes, v->data + (size_t)i * bytes, bytes);
        }
        k++;
    }
    int64_t left_out = bt->n - k;
    bt->n = k;
    return left_out;
}

int zp_batch_complete(const zp_batch_t *bt)
{
    return bt->filled >= bt->n;
}
