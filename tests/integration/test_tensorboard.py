"""RUN/tb/events.out.tfevents.*, read back with an independent reader: the
TFRecord framing parsed here, both masked CRC-32C of every record checked
(a bitwise CRC written here, not the writer's table), each Event decoded
with classes protoc --python_out makes from schemas/tensorboard.proto. The
first record is file_version "brain.Event:2"; train and test loss and
accuracy per epoch equal metrics.jsonl's (as float32, at the epoch's train
step); the per-step, stats and data-wait tags are there; logger.tensorboard:
false writes no tb/ folder; a trainer.command program's log() shows up as
its <event>/<key> tag. Exits 77 (skipped) without Debian's protoc and
python3-protobuf."""
import glob
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zp
from test_python import python_command

Event = None  # tensorboard_pb2.Event: event_class()
HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = os.path.join(HERE, "..", "..", "schemas", "tensorboard.proto")
PACKAGE = os.path.join(HERE, "..", "..", "python")


def crc32c(data):
    c = 0xffffffff
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82f63b78 if c & 1 else c >> 1
    return c ^ 0xffffffff


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xffffffff


def event_class():
    """tensorboard_pb2.Event, generated into a temporary folder."""
    out = tempfile.mkdtemp(prefix="zp-tbpb-")
    shutil.copy(PROTO, out)
    subprocess.run(["protoc", "--proto_path=" + out, "--python_out=" + out,
                    os.path.join(out, "tensorboard.proto")], check=True)
    sys.path.insert(0, out)
    import tensorboard_pb2
    shutil.rmtree(out)  # loaded: the folder is no longer needed
    return tensorboard_pb2.Event


def read_events(run_dir):
    """Every Event of the run's one event file, each frame's CRCs checked."""
    files = glob.glob(os.path.join(run_dir, "tb", "events.out.tfevents.*"))
    zp.check(len(files) == 1, "event files: %s" % files)
    with open(files[0], "rb") as f:
        data = f.read()
    events, pos = [], 0
    while pos < len(data):
        zp.check(pos + 12 <= len(data), "a frame's head cut at byte %d" % pos)
        head = data[pos:pos + 8]
        (n,), (hcrc,) = struct.unpack("<Q", head), struct.unpack("<I", data[pos + 8:pos + 12])
        zp.check(hcrc == masked(head), "record %d: length CRC %08x, want %08x" % (len(events), hcrc, masked(head)))
        body = data[pos + 12:pos + 12 + n]
        zp.check(len(body) == n and pos + 16 + n <= len(data), "record %d cut short" % len(events))
        (dcrc,) = struct.unpack("<I", data[pos + 12 + n:pos + 16 + n])
        zp.check(dcrc == masked(body), "record %d: data CRC %08x, want %08x" % (len(events), dcrc, masked(body)))
        e = Event()
        e.ParseFromString(body)
        events.append(e)
        pos += 16 + n
    return events


def scalars(events):
    """{tag: [(step, value), ...]} in file order."""
    out = {}
    for e in events[1:]:
        zp.check(e.WhichOneof("what") == "summary", "a record past the first is not a summary: %s" % e)
        for v in e.summary.value:
            out.setdefault(v.tag, []).append((e.step, v.simple_value))
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def the_built_in_trainers_scalars_match_metrics_jsonl():
    with zp.Workdir() as w:
        cfg = w.write("tb.yaml", zp.SYNTH.format(name="tb", train=640, test=192, cost=0, workers=2,
                                                  epochs=3))
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-2000:]))
        events = read_events(w.run_dir("tb"))
        zp.check(events[0].file_version == "brain.Event:2", "first record: %s" % events[0])
        tags = scalars(events)
        for split in ("train", "test"):
            ends = zp.epoch_ends(w.run_dir("tb"), split)
            zp.check(len(ends) == 3, "%s: %d epoch_end records" % (split, len(ends)))
            for key in ("loss", "accuracy"):
                want = [(m["step"], f32(m[key])) for m in ends]
                got = tags.get("%s/%s" % (split, key))
                zp.check(got == want, "%s/%s: %s, metrics.jsonl %s" % (split, key, got, want))
        steps = [m for m in zp.metrics(w.run_dir("tb")) if m.get("event") == "step"]
        want = [(m["step"], f32(m["lr"])) for m in steps]
        zp.check(want and tags.get("train_step/lr") == want,
                 "train_step/lr: %s, metrics.jsonl %s" % (tags.get("train_step/lr"), want))
        for tag in ("train_step/loss", "train_step/samples_per_s", "train/samples_per_s",
                    "trainer/data_wait", "trainer[0]/busy", "loader[0]/items_per_s",
                    "prefetch[0]/wait_out", "cache[0]/wait_in"):
            zp.check(tag in tags, "no %s among %s" % (tag, sorted(tags)))
        for tag, points in tags.items():
            if "[" in tag:  # stats: seconds since the start, at most one point each
                secs = [s for s, _ in points]
                zp.check(secs == sorted(set(secs)), "%s: steps %s" % (tag, secs))


def tensorboard_false_writes_no_tb_folder():
    with zp.Workdir() as w:
        cfg = w.write("off.yaml", zp.SYNTH.format(name="off", train=128, test=64, cost=0, workers=1,
                                                   epochs=1))
        rc, out, err = w.run("up", cfg, "logger.tensorboard=false")
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-2000:]))
        zp.check(os.path.exists(os.path.join(w.run_dir("off"), "metrics.jsonl")), "no metrics.jsonl")
        zp.check(not os.path.exists(os.path.join(w.run_dir("off"), "tb")), "tb/ written")


LOGS = """
import zeus_pipe
with zeus_pipe.attach() as zp:
    for epoch in range(2):
        for x, y in zp.train:
            pass
        for x, y in zp.test:
            pass
        zp.log("probe", step=10 * (epoch + 1), value=epoch + 0.25, other=-3)
"""


def a_user_programs_log_shows_up_as_its_tag():
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode:
        print("skipped a_user_programs_log_shows_up_as_its_tag: %s has no torch" % sys.executable)
        return
    with zp.Workdir() as w:
        w.write("logs.py", LOGS)
        cfg = w.write("user.yaml", zp.SYNTH.format(name="user", train=256, test=64, cost=0,
                                                    workers=1, epochs=2).replace(
            "  backend: cpu\n", "  command: [%s, logs.py]\n" % python_command()))
        env = dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE))
        p = w.start("up", cfg, env=env)
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, "exit %d:\n%s" % (p.returncode, err[-2000:]))
        tags = scalars(read_events(w.run_dir("user")))
        zp.check(tags.get("probe/value") == [(10, 0.25), (20, 1.25)], "probe/value: %s" % tags.get("probe/value"))
        zp.check(tags.get("probe/other") == [(10, -3.0), (20, -3.0)], "probe/other: %s" % tags.get("probe/other"))


if __name__ == "__main__":
    if not shutil.which("protoc") or subprocess.run(
            [sys.executable, "-c", "import google.protobuf"], capture_output=True).returncode:
        print("SKIP: needs protoc and %s's protobuf (Debian: apt install protobuf-compiler "
              "python3-protobuf)" % sys.executable)
        sys.exit(77)
    Event = event_class()
    zp.main([the_built_in_trainers_scalars_match_metrics_jsonl,
             tensorboard_false_writes_no_tb_folder,
             a_user_programs_log_shows_up_as_its_tag])
