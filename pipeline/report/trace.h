/* trace.h — the timeline of a run, RUN/trace.json, in the Chrome trace event
 * format that ui.perfetto.dev and chrome://tracing open; a pure function of
 * the run's events.msgpack.
 *
 * It holds one process per stage instance ("trainer[0]", "loader[1]"), named
 * with its OS pid, and in it one track per timed region of the stage's main
 * thread (regions of one thread overlap without nesting, which one track
 * cannot draw; the cuda backend's h2d, forward and backward, harvested a
 * batch late, land on their own tracks the same way): every timer sample is
 * a complete event ("ph":"X") placed by the start its "timer" record carries.
 * Each "stats" record adds counter events ("ph":"C"): the stage's queue depth
 * (tasks, fetches or batches), items per second and its busy share (0..1).
 * Timestamps are microseconds from the first event; otherData says when that
 * was (origin_unix_us), how many records were read and skipped.
 *
 * A prefetch's ring, from its "ring" records, gets tracks of its own: each
 * BATCH it sent and FREE it got back as an instant event ("ph":"i", args.slot)
 * on the track "ring: BATCH and FREE", a counter of the slots the trainer
 * holds (ring_slots_in_use) after each, and per slot a track "slot S: held
 * by the trainer" with one complete event ("held") from each BATCH to its
 * FREE: where the double buffering runs dry, the slots stand empty.
 *
 * Not in it: timer samples of records that carry no start (a version
 * before the trace): counted in otherData.samples_without_start.
 *
 * Bounded: past `max_events` timed, instant and counter events, it keeps the earliest
 * max_events/2 and the latest max_events - max_events/2, in bounded memory
 * whatever the size of the run, and says how many it left out — in
 * otherData.events_left_out and as a global instant event at the gap.
 * Every string taken from the events goes through zp_json_str.
 */
#ifndef ZP_TRACE_H
#define ZP_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct {
    int64_t records;   /* event records read */
    int64_t events;    /* timed and counter events written (metadata aside) */
    int64_t left_out;  /* past max_events */
    int64_t processes; /* stage instances */
} zp_trace_info_t;

/* Writes the trace of `data`, the `size` bytes of an events.msgpack, to
 * `out`; `run` names the run in otherData. max_events below 2 counts as 2.
 * 0, or ZP_ENOMEM (out then holds a partial file). */
int zp_trace(const char *data, size_t size, const char *run, int64_t max_events, FILE *out,
             zp_trace_info_t *info);

/* <run_dir>/events.msgpack into <run_dir>/trace.json (written aside and
 * renamed, so a reader never sees half a file). 0, or a negative errno or
 * ZP_E* code with the path and the reason in err (-ENOENT: no events.msgpack,
 * nothing to draw). */
int zp_trace_write(const char *run_dir, int64_t max_events, zp_trace_info_t *info, char *err,
                   size_t errlen);

#endif
