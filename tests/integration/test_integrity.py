"""Data integrity on real processes: a label outside the train split's classes
is refused naming its file, index and label; a flipped label byte in a cached
value is counted as corrupt and re-loaded, not served; a flipped byte in a
checkpoint's header is refused by --resume and eval; a torn events.msgpack
still gives a report that says what it skipped; and `zeus-pipe loader`
reaps a killed worker and restarts it."""
import glob
import os
import re
import shutil
import signal
import struct
import subprocess
import time
import zp

SYNTH = """
run: {{name: {name}}}
seed: 5
dataset:
  source: synthetic
  synthetic: {{train_samples: 1000, test_samples: 200, shape: [1, 8, 8], classes: 4}}
cache: {{enabled: {cache}, path: {path}}}
loader: {{workers: 2, task_size: 50}}
prefetch: {{batch_size: 100, depth: 2}}
trainer: {{backend: cpu, model: {{hidden: [16]}}, epochs: 1}}
"""

IDX = """
run: {{name: idx}}
dataset:
  source: idx
  path: {path}
  train_images: train-images
  train_labels: train-labels
  test_images: test-images
  test_labels: test-labels
cache: {{enabled: false}}
loader: {{workers: 1, task_size: 4}}
prefetch: {{batch_size: 4}}
trainer: {{backend: cpu, model: {{hidden: [8]}}, epochs: 1}}
"""


def synth(w, name, cache=False):
    return w.write(name + ".yaml", SYNTH.format(name=name, cache="true" if cache else "false",
                                                path=os.path.join(w.path, "cache")))


def write_idx(path, dims, data):
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims))
        f.write(bytes(data))


def a_test_label_beyond_the_train_classes_is_refused_naming_file_index_and_label():
    with zp.Workdir() as w:
        d = os.path.join(w.path, "idx")
        os.makedirs(d)
        write_idx(os.path.join(d, "train-images"), [12, 4, 4], [i % 256 for i in range(12 * 16)])
        write_idx(os.path.join(d, "train-labels"), [12], [i % 3 for i in range(12)])  # classes 0..2
        write_idx(os.path.join(d, "test-images"), [6, 4, 4], [7] * (6 * 16))
        write_idx(os.path.join(d, "test-labels"), [6], [0, 1, 2, 1, 7, 0])
        cfg = w.write("idx.yaml", IDX.format(path=d))
        rc, out, err = w.run("up", cfg)
        want = "%s: label 7 of sample 4 is outside the train split's classes 0..2" % \
            os.path.join(d, "test-labels")
        zp.check(rc == 2 and want in err, "exit %d: %s" % (rc, err))
        zp.check(not zp.stage_pids(w.path), "a stage was started")
        # the same file with labels in range runs
        write_idx(os.path.join(d, "test-labels"), [6], [0, 1, 2, 1, 2, 0])
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 0, "exit %d: %s" % (rc, err))


FLIP_LABEL = """
import lmdb, sys
env = lmdb.open(sys.argv[1], max_dbs=8)
db = env.open_db(b"synthetic/train")
with env.begin(write=True) as txn:
    key = (17).to_bytes(4, "big")
    v = bytearray(txn.get(key, db=db))
    v[20] ^= 0x01                # the label (header offset 20); the payload is intact
    txn.put(key, bytes(v), db=db)
    print(v[20] ^ 0x01, v[20])
"""


def a_flipped_label_byte_in_a_cached_value_is_corrupt_and_reloaded():
    with zp.Workdir() as w:
        cfg = synth(w, "warmed", cache=True)
        rc, out, err = w.run("warm", cfg)
        zp.check(rc == 0, err)
        r = subprocess.run(["/usr/bin/python3", "-c", FLIP_LABEL, os.path.join(w.path, "cache")],
                           capture_output=True, text=True, check=True)
        was, now = r.stdout.split()
        zp.check(was != now and 0 <= int(now) < 4, "the flipped label stays a valid class: " + r.stdout)
        rc, out, err = w.run("cache", "verify", os.path.join(w.path, "cache"))
        zp.check(rc == 1 and "synthetic/train key 17: checksum mismatch" in out, out + err)
        rc, out, err = w.run("up", cfg, "run.name=flipped")
        zp.check(rc == 0, err)
        ev = [m for m in zp.metrics(w.run_dir("flipped"))
              if m.get("event") == "cache" and m["split"] == "train"][0]
        zp.check((ev["hits"], ev["misses"], ev["corrupt"]) == (999, 1, 1), "flipped run: %s" % ev)
        rc, out, err = w.run("cache", "verify", os.path.join(w.path, "cache"))
        zp.check(rc == 0, "the re-loaded sample replaced the corrupt value: " + out)


def a_flipped_byte_in_a_checkpoint_header_is_refused_by_resume_and_eval():
    with zp.Workdir() as w:
        rc, out, err = w.run("up", synth(w, "c"))
        zp.check(rc == 0, err)
        last = os.path.join(w.run_dir("c"), "checkpoints", "last.ckpt")
        good = open(last, "rb").read()
        for at in (33, 41, 49, 57):  # step, epoch, batch, seed
            with open(last, "wb") as f:
                f.write(good[:at] + bytes([good[at] ^ 0x01]) + good[at + 1:])
            rc, out, err = w.run("up", "--resume", "c")
            zp.check(rc == 2 and "cannot resume: %s: header checksum mismatch" % last in err,
                     "byte %d: exit %d: %s" % (at, rc, err))
            zp.check(not zp.stage_pids(w.path), "a stage was started")
            rc, out, err = w.run("eval", "c", "--ckpt", "last")
            zp.check(rc == 2 and "%s: header checksum mismatch" % last in err,
                     "eval, byte %d: exit %d: %s" % (at, rc, err))


def every_checkpoint_rename_is_followed_by_an_fsync_of_its_folder():
    """Seen with strace (skipped where it is missing or cannot trace)."""
    strace = shutil.which("strace")
    if not strace:
        print("SKIP: no strace (Debian package strace)")
        return
    with zp.Workdir() as w:
        trace = os.path.join(w.path, "trace")
        # -ff: one file per thread, so no call of another thread comes between a
        # call's start and its end
        r = subprocess.run([strace, "-ff", "-qq", "-e", "trace=rename,openat,fsync", "-o", trace,
                            zp.BIN, "up", synth(w, "f")], cwd=w.path, capture_output=True,
                           text=True, timeout=240)
        if r.returncode != 0 and "ptrace" in r.stderr:
            print("SKIP: strace cannot trace here: " + r.stderr.strip()[-200:])
            return
        zp.check(r.returncode == 0, r.stderr[-1500:])
        folder = os.path.join(w.run_dir("f"), "checkpoints")
        renamed = 0
        for path in glob.glob(trace + ".*"):
            lines = open(path).read().splitlines()
            for i, line in enumerate(lines):
                if "rename(" not in line or ".ckpt.tmp" not in line:
                    continue
                renamed += 1
                after = lines[i + 1:i + 3]
                fd = after[0].rsplit("= ", 1)[-1] if after else "?"
                zp.check(len(after) == 2 and 'openat(AT_FDCWD, "%s", O_RDONLY' % folder in after[0] and
                         "O_DIRECTORY" in after[0] and after[1].startswith("fsync(%s)" % fd) and
                         after[1].endswith("= 0"), "after %s: %s" % (line, after))
        zp.check(renamed, "no checkpoint was renamed")


RECORD = b"\x83\xa1v\x01\xa1t\xa5event"  # the start of every EVENT header (schemas/msg.c)


def records(data):
    """(start, end) of each record, as the writer put them back to back."""
    starts = []
    at = data.find(RECORD)
    while at >= 0:
        starts.append(at)
        at = data.find(RECORD, at + 1)
    return list(zip(starts, starts[1:] + [len(data)]))


def a_torn_events_file_is_reported_on_with_what_was_skipped():
    with zp.Workdir() as w:
        rc, out, err = w.run("up", synth(w, "e"))
        zp.check(rc == 0, err)
        path = os.path.join(w.run_dir("e"), "events.msgpack")
        data = open(path, "rb").read()
        spans = records(data)
        zp.check(len(spans) > 20 and spans[0][0] == 0, "%d records" % len(spans))
        a, b = spans[len(spans) // 2]
        garbled = data[:a + 12] + b"\xc1" * 5 + data[a + 17:]  # 0xc1: never valid msgpack
        cut = len(data) - (spans[-1][1] - spans[-1][0]) // 2  # the last record torn
        with open(path, "wb") as f:
            f.write(garbled[:cut])
        rc, out, err = w.run("report", "e")
        skipped = (b - a) + (cut - spans[-1][0])
        zp.check(rc == 0 and "run e" in out and "loss" in out, "exit %d: %s %s" % (rc, out, err))
        want = "events.msgpack: skipped %d bytes (2 torn or garbled records)" % skipped
        zp.check(want in out, "wanted %r in:\n%s" % (want, out))
        # a middle record cut short (a writer killed, the run resumed): skipped alone
        c, d = spans[len(spans) // 3]
        with open(path, "wb") as f:
            f.write(data[:c + (d - c) // 2] + data[d:])
        rc, out, err = w.run("report", "e", "--json")
        zp.check(rc == 0 and '"skipped_bytes":%d,"skipped_records":1' % ((d - c) // 2) in out,
                 "exit %d: %s %s" % (rc, out[-600:], err))


def children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(x) for x in f.read().split()]


def state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def catches(pid, sig):
    """True when process pid has a handler installed for sig (SigCgt in /proc)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except FileNotFoundError:
        pass
    return False


def a_killed_remote_loader_worker_is_reaped_and_restarted():
    with zp.Workdir() as w:
        rc, out, err = w.run("keygen", "host")
        zp.check(rc == 0, err)
        rc, out, err = w.run("keygen", "server")
        zp.check(rc == 0, err)
        cfg = synth(w, "far")
        # nobody listens there: the workers keep reconnecting, which is all we need
        p = w.start("loader", "--connect", "127.0.0.1:9", "--server-key", "server.pub",
                    "--key", "host.key", "--workers", "3", cfg, "loader.heartbeat_ms=100")
        kids = zp.wait_for(lambda: len(children(p.pid)) == 3 and children(p.pid), 20, "3 workers")
        victim = kids[1]
        os.kill(victim, signal.SIGKILL)
        zp.wait_for(lambda: state(victim) is None, 20, "the killed worker to be reaped")
        zp.wait_for(lambda: len(children(p.pid)) == 3 and victim not in children(p.pid), 20,
                    "a worker in its place")
        zp.check(all(state(k) not in ("Z", None) for k in children(p.pid)),
                 "states %s" % [state(k) for k in children(p.pid)])
        # the new worker is a fresh exec: stop it once it handles SIGTERM (under
        # ASan its start takes a while), so that it too says what it loaded
        zp.wait_for(lambda: all(catches(k, signal.SIGTERM) for k in children(p.pid)), 20,
                    "every worker to handle SIGTERM")
        os.kill(p.pid, signal.SIGTERM)
        out, err = p.communicate(timeout=30)
        zp.check(p.returncode == 128 + signal.SIGTERM, "exit %d: %s" % (p.returncode, err[-1500:]))
        zp.check(re.search(r"loader\[[012]\] was killed by signal 9 \(Killed\); restarting it", err),
                 err[-1500:])
        zp.check(err.count("stopping: loaded") == 3, "every worker stops: " + err[-1500:])


def stages_start_through_a_wrapper_found_on_path_and_a_missing_one_is_named():
    """The spawn path resolves ZP_STAGE_WRAPPER on PATH before the fork (the
    child only execs): `env` runs every stage; a missing program is named by
    the child that could not exec it, and the run stops."""
    with zp.Workdir() as w:
        env = dict(os.environ, ZP_STAGE_WRAPPER="env")
        p = w.start("up", synth(w, "wrapped"), env=env)
        out, err = p.communicate(timeout=120)
        zp.check(p.returncode == 0, "exit %d: %s" % (p.returncode, err[-1500:]))
        zp.check(len(zp.epoch_ends(w.run_dir("wrapped"), "train")) == 1, "no epoch")
        env["ZP_STAGE_WRAPPER"] = "zp-no-such-wrapper --flag"
        p = w.start("up", synth(w, "missing"), env=env)
        out, err = p.communicate(timeout=120)
        logs = "".join(open(f).read() for f in glob.glob(os.path.join(w.run_dir("missing"), "logs", "*")))
        zp.check(p.returncode != 0 and "]: cannot exec zp-no-such-wrapper" in logs,
                 "exit %d: %s\n%s" % (p.returncode, err[-1500:], logs[-1500:]))


if __name__ == "__main__":
    zp.main([a_test_label_beyond_the_train_classes_is_refused_naming_file_index_and_label,
             a_flipped_label_byte_in_a_cached_value_is_corrupt_and_reloaded,
             a_flipped_byte_in_a_checkpoint_header_is_refused_by_resume_and_eval,
             every_checkpoint_rename_is_followed_by_an_fsync_of_its_folder,
             a_torn_events_file_is_reported_on_with_what_was_skipped,
             a_killed_remote_loader_worker_is_reaped_and_restarted,
             stages_start_through_a_wrapper_found_on_path_and_a_missing_one_is_named])
