"""RUN/trace.json on a real run: the logger writes it as the run ends, in the
Chrome trace event format (a JSON object with traceEvents): one process per
stage instance, complete events of the trainer's and the prefetch's regions
with non-negative durations, counter events, the ring's BATCH and FREE messages
with each slot's holds by the trainer; `zeus-pipe report RUN --trace`
writes the same events again from events.msgpack; a small
logger.trace_max_events bounds it and says so. Nothing here depends on how
fast the machine is: only on what the run did."""
import collections
import json
import os
import zp

CONFIG = """
run: {name: tr}
seed: 3
dataset:
  source: synthetic
  synthetic: {train_samples: 1024, test_samples: 128, shape: [1, 8, 8], classes: 4}
loader: {workers: 2, task_size: 16}
prefetch: {batch_size: 64, depth: 2}
trainer:
  backend: cpu
  model: {hidden: [16]}
  epochs: 2
logger: {stat_interval_ms: 100}
"""


def load(run_dir):
    with open(os.path.join(run_dir, "trace.json")) as f:
        return json.load(f)


def processes(trace):
    return {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "process_name"}


def a_run_writes_its_timeline_and_report_writes_it_again():
    with zp.Workdir() as w:
        cfg = w.write("t.yaml", CONFIG)
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 0, err)
        d = w.run_dir("tr")
        t = load(d)
        ev = t["traceEvents"]
        procs = processes(t)
        names = sorted(n for p, n in procs.items() if p != 0)
        for want in ("cache[0]", "loader[0]", "loader[1]", "logger[0]", "prefetch[0]", "trainer[0]"):
            zp.check(want in names, "no process %s in %s" % (want, names))
        zp.check(len(names) == len(set(names)), "a stage instance twice: %s" % names)
        x = [e for e in ev if e["ph"] == "X"]
        regions = collections.Counter((procs[e["pid"]], e["name"]) for e in x)
        # 2 epochs of 1024 / 64 train batches and 128 / 64 test batches, each timed
        zp.check(regions[("trainer[0]", "batch")] == 2 * (16 + 2), regions)
        zp.check(regions[("trainer[0]", "backward")] == 2 * 16, regions)
        zp.check(regions[("trainer[0]", "epoch")] >= 2, regions)
        zp.check(regions[("prefetch[0]", "collate")] > 0, regions)
        zp.check(all(e["dur"] >= 0 and e["ts"] >= 0 for e in x), "a negative duration or time")
        # a batch holds its forward pass: the timeline places samples where they were
        batches = sorted((e["ts"], e["ts"] + e["dur"]) for e in x
                         if procs[e["pid"]] == "trainer[0]" and e["name"] == "batch")
        fwd = [e for e in x if procs[e["pid"]] == "trainer[0]" and e["name"] == "forward"]
        # (to 2 us: starts are whole microseconds, `time` a double of seconds)
        inside = sum(any(b0 - 2 <= e["ts"] and e["ts"] + e["dur"] <= b1 + 2 for b0, b1 in batches) for e in fwd)
        out = [min(max(b0 - e["ts"], e["ts"] + e["dur"] - b1) for b0, b1 in batches) for e in fwd]
        zp.check(fwd and inside == len(fwd), "%d of %d forward passes inside a batch; off by %s us"
                 % (inside, len(fwd), sorted(out)[-5:]))
        c = [e for e in ev if e["ph"] == "C"]
        zp.check(any(e["name"] == "queue" and procs[e["pid"]] == "prefetch[0]" for e in c), "no queue counter")
        # the ring: every batch sent once and freed once, each held by the trainer on its slot's
        # track from BATCH to FREE, never more slots held than the ring has (depth 2)
        inst = [e for e in ev if e["ph"] == "i"]
        msgs = collections.Counter((procs[e["pid"]], e["name"]) for e in inst)
        zp.check(msgs == {("prefetch[0]", "BATCH"): 36, ("prefetch[0]", "FREE"): 36}, msgs)
        held = [e for e in x if e.get("cat") == "ring"]
        zp.check(len(held) == 36 and all(e["name"] == "held" and e["dur"] >= 0 for e in held), held[:3])
        slots = {e["tid"] for e in held}
        zp.check(len(slots) == 2, "holds on tracks %s" % slots)
        tracks = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
        zp.check({"slot 0: held by the trainer", "slot 1: held by the trainer", "ring: BATCH and FREE"} <= tracks,
                 tracks)
        used = [e["args"]["ring_slots_in_use"] for e in c if e["name"] == "ring_slots_in_use"]
        zp.check(len(used) == 72 and min(used) >= 0 and 1 <= max(used) <= 2 and used[-1] == 0, used)
        od = t["otherData"]
        zp.check(od["events"] == len(x) + len(c) + len(inst) and od["events_left_out"] == 0, od)
        zp.check(od["samples_without_start"] == 0 and od["unreadable"] == 0, od)
        written = len(x) + len(c) + len(inst)

        os.remove(os.path.join(d, "trace.json"))
        rc, out, err = w.run("report", d, "--trace")
        zp.check(rc == 0 and "trace.json: %d events" % written in out, out + err)
        again = load(d)
        zp.check(len([e for e in again["traceEvents"] if e["ph"] in "XCi"]) == written, "another count")


def a_small_bound_keeps_the_ends_and_says_so():
    with zp.Workdir() as w:
        cfg = w.write("t.yaml", CONFIG)
        rc, out, err = w.run("up", cfg, "logger.trace_max_events=100")
        zp.check(rc == 0, err)
        t = load(w.run_dir("tr"))
        kept = [e for e in t["traceEvents"] if e["ph"] in "XC" or e["ph"] == "i" and e["s"] == "t"]
        od = t["otherData"]
        zp.check(len(kept) == 100 and od["events_left_out"] > 0, od)
        gap = [e for e in t["traceEvents"] if e["ph"] == "i" and e["s"] == "g"]
        zp.check(len(gap) == 1 and "%d events left out" % od["events_left_out"] in gap[0]["name"], gap)
        ts = [e["ts"] for e in kept]
        zp.check(ts == sorted(ts), "not in time order")


def no_events_no_trace_and_the_file_is_named():
    with zp.Workdir() as w:
        os.makedirs(os.path.join(w.path, "runs", "empty"))
        rc, out, err = w.run("report", "empty", "--trace")
        zp.check(rc == 1 and "events.msgpack" in err, err)
        zp.check(not os.path.exists(os.path.join(w.path, "runs", "empty", "trace.json")), "a trace of nothing")


if __name__ == "__main__":
    zp.main([a_run_writes_its_timeline_and_report_writes_it_again, a_small_bound_keeps_the_ends_and_says_so,
             no_events_no_trace_and_the_file_is_named])
