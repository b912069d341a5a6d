/* resources.h — what a run writes into its own directory about itself, so
 * that whoever comes after a crash knows what it left.
 *
 * RUN/resources: every shared-memory segment, socket file and nested run
 * folder the run creates, one line each, appended by the process that
 * creates it, before it creates it (O_APPEND, one write(2) a line):
 *
 *   host NAME        the host the run's supervisor runs on (written first)
 *   shm /zp-...      a shared-memory segment (a rank's ring)
 *   sock PATH        a bound ipc socket file, RUN/sock/NAME.ipc
 *   run PATH         a nested run folder (a Slurm rank's RUN/rank-<r>)
 *
 * Cleanup removes exactly those, and only names that belong to the run: a
 * segment named after the run directory's hash, a file in its sock/, a
 * folder directly inside it (whose own supervisor is dead).
 *
 * RUN/logs/loader-<i>.delivered: the pid of loader i once it has returned
 * samples, so that the supervisor tells a loader killed at work from one
 * that dies before it delivers anything (a crash loop).
 *
 * RUN/logs/trainer-<r>.attached: locked (flock, exclusive) by the one program
 * attached as rank r (zp_client_attach) until it detaches or dies, so that
 * the supervisor of `up --attach` knows when every rank has let go.
 *
 * RUN/stopped: one sentence, written by the supervisor (aside, then renamed)
 * before it stops a run that did not end by itself — `zeus-pipe down`, a
 * signal, a failed stage — so that a program waiting for a batch learns at
 * once that none will come, and why (zp_client_next). A new start of the run
 * (`up --resume`) removes it. */
#ifndef ZP_RESOURCES_H
#define ZP_RESOURCES_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* The longest line of RUN/resources. */
#define ZP_RESOURCES_LINE_MAX (PATH_MAX + 16)

/* RUN/resources, and RUN/logs/loader-<instance>.delivered. */
void zp_resources_path(char *buf, size_t len, const char *run_dir);
void zp_resources_mark_path(char *buf, size_t len, const char *run_dir, int instance);

/* Starts the run's record with this host's name. 0 or a negative errno. */
int zp_resources_start(const char *run_dir);
/* Appends "KIND NAME" (kind: "shm", "sock" or "run"). 0, or a negative
 * errno / ZP_EINVAL with the file and the reason logged. */
int zp_resources_add(const char *run_dir, const char *kind, const char *name);
/* For an endpoint "ipc://RUN/sock/NAME.ipc": appends "sock RUN/sock/NAME.ipc"
 * to RUN/resources. Other endpoints (tcp, inproc) need no record: 0. */
int zp_resources_add_endpoint(const char *endpoint);
/* Loader `instance` of the run has delivered samples: writes its pid. */
int zp_resources_mark_delivered(const char *run_dir, int instance);

/* RUN/logs/trainer-<rank>.attached. */
void zp_resources_attach_path(char *buf, size_t len, const char *run_dir, int rank);
/* Marks rank as attached by this process (an exclusive lock, the file
 * holding its pid): returns the file's descriptor (close-on-exec; closing it
 * is detaching); -EBUSY when another live process holds the rank, with its
 * pid in *holder (0: unknown; holder may be NULL); or another negative errno
 * when the file cannot be made (the caller goes on unmarked). */
int zp_resources_attach_hold(const char *run_dir, int rank, long *holder);
/* 1 while a live process holds rank's mark, else 0 (no file, or released). */
int zp_resources_attached(const char *run_dir, int rank);
/* The holder of the mark at fd had its END: "end" replaces its pid, so that
 * the supervisor of `up --attach` ends the run once it lets go, even when
 * the prefetch still waits for a seek. 0 or a negative errno. */
int zp_resources_attach_end(int fd);
/* 1 when rank's mark says its program had its END (and no one holds it). */
int zp_resources_attach_ended(const char *run_dir, int rank);
/* The holder of the mark at fd detaches before its END, having read `epochs`
 * train epochs to their end: "left EPOCHS" replaces its pid, so that the
 * supervisor can say the run ended there (a loop of fewer epochs than
 * trainer.epochs), not that it failed. 0 or a negative errno. */
int zp_resources_attach_leave(int fd, int64_t epochs);
/* 1 with *epochs set when rank's mark says its program left before its END
 * (and no one holds it), else 0. */
int zp_resources_attach_left(const char *run_dir, int rank, int64_t *epochs);

/* Writes RUN/stopped with `why`. 0 or a negative errno. */
int zp_resources_mark_stopped(const char *run_dir, const char *why);
/* 1 with the sentence in buf when RUN/stopped exists, else 0. */
int zp_resources_stopped(const char *run_dir, char *buf, size_t len);
/* Removes RUN/stopped (a run starting again). */
void zp_resources_clear_stopped(const char *run_dir);
#endif
