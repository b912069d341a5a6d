"""Every file a run reads back is input (issue 29): `report`, `report --json`,
`--html` and `--trace` over run directories corrupted as a kill, a disk or a
hand corrupts them — events.msgpack truncated and bit-flipped, the records
msgpack-c has no memory for, metrics.jsonl with counts that overflow or that
made the page quadratic — exit 0 with the good records reported, or refuse
with a sentence; never a signal, a sanitizer report, an allocation past
max_allocation_size_mb (ASan) or the address-space limit, or a hang. In the
sanitizer build (scripts/test.sh's build-asan) this is the check that no
reader reads or computes out of bounds."""
import json
import os
import random
import resource
import shutil
import zp

CONFIG = """
run: {{name: {name}}}
seed: 29
dataset:
  source: synthetic
  synthetic: {{train_samples: 600, test_samples: 100, shape: [1, 8, 8], classes: 4}}
loader: {{workers: 1, task_size: 50}}
prefetch: {{batch_size: 100}}
trainer:
  backend: cpu
  model: {{hidden: [16]}}
  epochs: 3
"""

COMMANDS = ([], ["--json"], ["--html"], ["--trace"])
ASAN = "__asan_init" in open(zp.BIN, "rb").read().decode("latin-1")


def limited():
    """A child's address space: 2 GiB (ASan reserves terabytes of shadow: there
    max_allocation_size_mb bounds one allocation instead)."""
    if not ASAN:
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def report(w, run, args):
    env = dict(os.environ, ASAN_OPTIONS="max_allocation_size_mb=512:allocator_may_return_null=0")
    p = w.start("report", run, *args, preexec_fn=limited, env=env)
    out, err = p.communicate(timeout=120)
    return p.returncode, out, err


def check_reports(w, run, case, epochs=None):
    """Each command on `run`: exit 0, or 1/2 with a sentence; `epochs`: the
    JSON report has that many (the good records are all there)."""
    for args in COMMANDS:
        rc, out, err = report(w, run, args)
        what = "%s: report %s" % (case, " ".join(args))
        zp.check(rc in (0, 1, 2), "%s: exit %d (a signal?)\n%s" % (what, rc, err[-3000:]))
        zp.check("Sanitizer" not in err and "runtime error:" not in err, "%s:\n%s" % (what, err[-6000:]))
        zp.check(rc == 0 or ("zeus-pipe" in err and len(err.strip()) > 30),
                 "%s: exit %d without a reason: %r" % (what, rc, err))
        if args == ["--json"] and epochs is not None:
            zp.check(rc == 0, "%s: exit %d\n%s" % (what, rc, err))
            got = len(json.loads(out)["epochs"])
            zp.check(got == epochs, "%s: %d epochs reported, want %d" % (what, got, epochs))


def a_real_run(w):
    rc, out, err = w.run("up", w.write("r.yaml", CONFIG.format(name="good")))
    zp.check(rc == 0, err)
    return w.run_dir("good")


def copy_of(w, good, name):
    d = os.path.join(w.path, "runs", name)
    shutil.copytree(good, d, ignore=shutil.ignore_patterns("sock"))
    return d


def rewrite(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def truncated_and_flipped_events_keep_the_report():
    with zp.Workdir() as w:
        good = a_real_run(w)
        events = open(os.path.join(good, "events.msgpack"), "rb").read()
        check_reports(w, good, "the run as written", epochs=3)
        for cut in (0, 1, 16, len(events) // 3, len(events) - 5):
            d = copy_of(w, good, "cut-%d" % cut)
            rewrite(d, "events.msgpack", events[:cut])
            check_reports(w, d, "events.msgpack cut at %d" % cut)
        rnd = random.Random(29)
        for i in range(12):
            d = copy_of(w, good, "flip-%d" % i)
            at = rnd.randrange(len(events))
            data = bytearray(events)
            data[at] ^= 1 << rnd.randrange(8)
            rewrite(d, "events.msgpack", bytes(data))
            check_reports(w, d, "events.msgpack with bit %d flipped" % at)


def records_msgpack_has_no_memory_for_are_skipped():
    """Issue 29's cases: a record start then 33 nested arrays, a map32 of
    2^32 - 1 pairs, an array32 of 2^28: each record is skipped, all 3 epochs
    are reported (the whole report was lost: "out of memory")."""
    with zp.Workdir() as w:
        good = a_real_run(w)
        events = open(os.path.join(good, "events.msgpack"), "rb").read()
        start = events[:16]
        bad = {"nested-33": b"\x91" * 33 + b"\xc0", "map32": b"\xdf\xff\xff\xff\xff",
               "array32-2^28": b"\xdd\x10\x00\x00\x00\xc0", "str32-2^31": b"\xdb\x7f\xff\xff\xff"}
        for name, tail in bad.items():
            d = copy_of(w, good, name)
            middle = max(events.find(start, len(events) // 2), 0)
            rewrite(d, "events.msgpack", start + tail + events[:middle] + start + tail + events[middle:])
            check_reports(w, d, "events.msgpack with %s records" % name, epochs=3)


def epoch_line(epoch, split, samples, skipped=0, expected=None):
    return json.dumps({"kind": "metric", "stage": "trainer", "instance": 0, "pid": 1,
                       "time": 1.7e9 + epoch, "event": "epoch_end", "split": split,
                       "epoch": epoch, "epochs": 400, "step": epoch, "samples": samples,
                       "expected_samples": samples + skipped if expected is None else expected,
                       "skipped": skipped, "distinct": samples,
                       "index_checksum": "0123456789abcdef", "order_digest": "0",
                       "samples_per_s": 1.0, "seconds": 1.0, "loss": 1.0, "accuracy": 0.5}) + "\n"


def jsonl_files_with_hostile_numbers_are_reported():
    """Without events.msgpack: counts at INT64_MAX (samples + skipped
    overflowed: the sanitizer build aborted --html), 400 epochs of sizes near
    10^8 that differ (28 s of CPU for --html), and metrics.jsonl cut
    mid-line or garbled."""
    with zp.Workdir() as w:
        good = a_real_run(w)
        metrics = open(os.path.join(good, "metrics.jsonl"), "rb").read()
        cases = {
            "int64-max": epoch_line(0, "train", 2**63 - 1, 1, -2**63) + epoch_line(1, "test", 2**63 - 1, 0),
            "sizes-near-1e8": "".join(epoch_line(e // 2, ("train", "test")[e % 2], 10**8 - 400 + e)
                                      for e in range(400)),
            "epoch-2^63": epoch_line(2**63 - 1, "train", 10) + epoch_line(-5, "test", 10),
            "cut-mid-line": metrics[:len(metrics) // 2 + 7].decode("latin-1"),
            "garbled": "".join(chr(random.Random(i).randrange(32, 127)) for i in range(3000)),
        }
        for name, text in cases.items():
            d = copy_of(w, good, "jsonl-" + name)
            os.unlink(os.path.join(d, "events.msgpack"))
            rewrite(d, "metrics.jsonl", text.encode("latin-1"))
            check_reports(w, d, "metrics.jsonl " + name)


if __name__ == "__main__":
    zp.main([truncated_and_flipped_events_keep_the_report,
             records_msgpack_has_no_memory_for_are_skipped,
             jsonl_files_with_hostile_numbers_are_reported])
