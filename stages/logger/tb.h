/* tb.h — the logger's TensorBoard writer: scalars into RUN/tb/events.out.tfevents.*
 * (TFRecord framing around Event records of schemas/tensorboard.proto), so
 * `tensorboard --logdir runs/` plots a run, or every run of a sweep side by side.
 *
 * Tags and their x axis (the Event's step):
 *   train/loss, train/accuracy, train/samples_per_s, test/... (epoch_end records)
 *   train_step/loss, train_step/accuracy, train_step/samples_per_s, train_step/lr
 *                                      (step records, each logging interval)
 *                                      the train step
 *   <split>/cache_hit_rate (cache records) the last train step heard of
 *   <event>/<key> (a user program's log(): any other metric event)  its step
 *   <stage>[<instance>]/items_per_s, busy, wait_in, wait_out, hit_rate (stats),
 *   trainer/data_wait (rank 0's share of time waiting for data)
 *                                      seconds since the writer opened
 *
 * Bounded for a run of any length: a tag's points are at least `gap` steps
 * apart; gap starts at 1 and doubles each time ZP_TB_POINTS_PER_GAP points
 * were written at it, so a run of S steps writes at most
 * ZP_TB_POINTS_PER_GAP * (1 + log2 S) points per tag (stats, one a second
 * at most). At most ZP_TB_TAGS_MAX tags; later ones are left out, counted. */
#ifndef ZP_STAGE_LOGGER_TB_H
#define ZP_STAGE_LOGGER_TB_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#define ZP_TB_POINTS_PER_GAP 1000
#define ZP_TB_TAGS_MAX 1024
#define ZP_TB_TAG_MAX 128 /* bytes of a tag, with its NUL; a longer one is cut */

typedef struct zp_tb zp_tb_t;

/* Creates `dir` (mkdir -p) and opens dir/events.out.tfevents.<seconds>.<host>
 * in it, writing the file_version record. The writer in *out; 0, or an error
 * (*out NULL, the reason logged naming the path) when the folder or the file
 * cannot be made. */
int zp_tb_create(zp_tb_t **out, const char *dir);
/* Flushes and closes; safe twice (sets *tb to NULL). */
void zp_tb_destroy(zp_tb_t **tb);

/* Adds one point of `tag` unless thinned (above). Returns 1 written, 0 left
 * out, -1 the file could not be written (logged once; the writer stops). */
int zp_tb_scalar(zp_tb_t *tb, const char *tag, int64_t step, double wall_time, double value);
/* The points of one logger record (an EVENT body: schemas/records.h). */
void zp_tb_record(zp_tb_t *tb, const msgpack_object *body);
void zp_tb_flush(zp_tb_t *tb);

/* CRC-32C (Castagnoli) of n bytes, and its TFRecord mask. */
uint32_t zp_tb_crc32c(const void *p, size_t n);
uint32_t zp_tb_mask(uint32_t crc);

#endif
