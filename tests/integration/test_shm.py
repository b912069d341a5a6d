"""Shared memory: a ring that does not fit in /dev/shm is refused before any
stage starts, with what is needed, what is free and what to do; /dev/shm
filling up after that check is reported by the prefetch (posix_fallocate),
never a SIGBUS; and a dead run's ring file of the same name is never read by
the trainer. /dev/shm is a small tmpfs in a private mount namespace (root)."""
import os
import re
import struct
import subprocess
import zp

CONFIG = """
run: {{name: {name}}}
seed: 5
dataset:
  source: synthetic
  synthetic: {{train_samples: {train}, test_samples: 128, shape: {shape}, classes: 4}}
loader: {{workers: 1, task_size: 64}}
prefetch: {{batch_size: 64, depth: 2}}
trainer:
  backend: cpu
  model: {{hidden: [8]}}
  epochs: 1
logger: {{stat_interval_ms: 200}}
"""

# A stage wrapper (ZP_STAGE_WRAPPER) that runs before the prefetch is exec'd.
WRAPPER = r'''
import os, sys, time
args = sys.argv[1:]          # zeus-pipe stage NAME --run RUN ...
if args[2] == "prefetch":
    what = os.environ["ZP_TEST_BEFORE_PREFETCH"]
    if what == "fill":       # /dev/shm fills up between the supervisor's check and the ring
        with open("/dev/shm/zp-test-filler", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()
            except OSError:
                pass
    else:                    # what = "trainer-waits:RING:NOTE"
        _, ring, note = what.split(":")
        run = args[args.index("--run") + 1]
        state, end = "the trainer never started", time.time() + 120
        while time.time() < end:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    cmd = open("/proc/%s/cmdline" % pid, "rb").read().split(b"\0")
                    if b"trainer" not in cmd or run.encode() not in cmd:
                        continue
                    # blocked in poll: waiting for the prefetch's first message
                    if open("/proc/%s/syscall" % pid).read().split()[0] not in ("7", "271"):
                        continue
                    maps = open("/proc/%s/maps" % pid).read()
                except OSError:
                    continue
                state = "mapped" if ring in maps else "not mapped"
                break
            else:
                time.sleep(0.01)
                continue
            break
        open(note, "w").write(state)
os.execvp(args[0], args)
'''


def shm_run(w, cfg, before_prefetch=None, stale=None):
    """`zeus-pipe up cfg` with /dev/shm a 16 MiB tmpfs of its own, holding the
    file stale = (name, bytes) when given."""
    env = dict(os.environ)
    if before_prefetch:
        env["ZP_STAGE_WRAPPER"] = "/usr/bin/python3 " + w.write("wrap.py", WRAPPER)
        env["ZP_TEST_BEFORE_PREFETCH"] = before_prefetch
    script = "mount -t tmpfs -o size=16m tmpfs /dev/shm && "
    if stale:
        with open(os.path.join(w.path, "stale"), "wb") as f:
            f.write(stale[1])
        script += "cp stale /dev/shm/%s && " % stale[0]
    script += "exec \"$0\" up \"$1\""
    p = subprocess.Popen(["unshare", "-m", "sh", "-c", script, zp.BIN, cfg], cwd=w.path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    w.procs.append(p)
    out, err = p.communicate(timeout=240)
    return p.returncode, err


def ring_file(run_dir, rank):
    """/dev/shm file of a run's ring of `rank`, named as zp_ring_name() does."""
    return zp.ring_path(run_dir)[:-1] + str(rank)


def a_ring_larger_than_shm_is_refused_before_any_stage_starts():
    with zp.Workdir() as w:
        # 3x224x224 float32 batches of 64, double-buffered: 73.5 MiB for a 16 MiB /dev/shm
        cfg = w.write("big.yaml", CONFIG.format(name="big", train=640, shape="[3, 224, 224]"))
        rc, err = shm_run(w, cfg)
        zp.check(rc == 2, "exit %s, want 2:\n%s" % (rc, err))
        zp.check(re.search(r"the batch ring \(1 x prefetch.depth 2 x 36.8 MiB a batch\) needs "
                           r"73.5 MiB of shared memory, /dev/shm has 16.0 MiB free", err), err)
        for advice in ("--shm-size", "prefetch.depth", "prefetch.batch_size", "dataset.dtype: uint8"):
            zp.check(advice in err, "no '%s' in:\n%s" % (advice, err))
        zp.check("signal" not in err and not os.path.exists(w.run_dir("big")),
                 "a stage started:\n" + err)


def shm_filled_after_the_check_is_an_error_of_the_prefetch_not_a_sigbus():
    with zp.Workdir() as w:
        cfg = w.write("fill.yaml", CONFIG.format(name="fill", train=640, shape="[1, 28, 28]"))
        rc, err = shm_run(w, cfg, before_prefetch="fill")
        zp.check(rc == 1, "exit %s, want 1:\n%s" % (rc, err))
        zp.check("signal" not in err and "Bus error" not in err, "a stage was killed:\n" + err)
        zp.check("prefetch[0] exited with status 1" in err, err)
        zp.check(re.search(r"shared memory /zp-[0-9a-f]+-ring0: 2 slots of 0\.2 MiB: posix_fallocate: "
                           r"No space left on device: needs 0\.4 MiB of shared memory, /dev/shm has "
                           r"0\.0 MiB free; give /dev/shm more room", err), err)


def a_dead_runs_ring_left_in_shm_is_never_read():
    with zp.Workdir() as w:
        cfg = w.write("stale.yaml", CONFIG.format(name="stale", train=640, shape="[1, 8, 8]"))
        ring = ring_file(w.run_dir("stale"), 0)
        # a dead run's ring of this run's name and layout: a header as pipeline/ring/ring.c
        # writes it (magic, depth, slot bytes, nonce), then slots whose every index
        # is 0 and every pixel NaN
        slot = 20480  # 64 x 4 + 64 x 4 (64-byte aligned) + 64 x 64 floats, in pages
        header = struct.pack("<QIIQQ", 0x7a7072696e670002, 2, 0, slot, 0x5a5a5a5a)
        body = (b"\0" * 512 + b"\xff" * (slot - 512)) * 2
        note = os.path.join(w.path, "note")
        name = os.path.basename(ring)
        rc, err = shm_run(w, cfg, before_prefetch="trainer-waits:%s:%s" % (name, note),
                          stale=(name, header + b"\0" * (4096 - len(header)) + body))
        zp.check(rc == 0, "exit %s:\n%s" % (rc, err))
        state = open(note).read()
        zp.check(state == "not mapped", "when the prefetch started, the trainer had %s the stale ring" % state)
        for split, n in (("train", 640), ("test", 128)):
            for e in zp.epoch_ends(w.run_dir("stale"), split):
                zp.check(e["samples"] == n and e["distinct"] == n and
                         e["index_checksum"] == zp.index_checksum(range(n)),
                         "%s: %d samples, %d distinct: a batch was read from the stale ring" %
                         (split, e["samples"], e["distinct"]))


if __name__ == "__main__":
    zp.main([a_ring_larger_than_shm_is_refused_before_any_stage_starts,
             shm_filled_after_the_check_is_an_error_of_the_prefetch_not_a_sigbus,
             a_dead_runs_ring_left_in_shm_is_never_read])
