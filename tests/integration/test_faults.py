"""Loaders that come and go: SIGKILLed at random (50 times) and SIGSTOPped past
the liveness window during a run, or scaled from 1 to 4 and back to 1 — every
epoch still delivers each sample exactly once, in the order an undisturbed run
has, and the report counts the loaders lost and the tasks re-queued."""
import json
import os
import random
import signal
import subprocess
import threading
import time
import zp

CONFIG = """
run: {{name: {name}}}
seed: 11
dataset:
  source: synthetic
  synthetic: {{train_samples: {train}, test_samples: 400, shape: [1, 8, 8], classes: 4, cost_us: {cost}}}
loader: {{workers: {workers}, task_size: 16, credit: 2, heartbeat_ms: 100, liveness: 3,
          max_restarts_per_min: 1000}}
prefetch: {{batch_size: 64, depth: 2, window: 8}}
trainer:
  backend: cpu
  model: {{hidden: [16]}}
  epochs: {epochs}
  log_every_steps: 20
logger: {{stat_interval_ms: 200}}
"""


def loader_pids(w):
    out = []
    for pid in zp.stage_pids(w.path):
        try:
            if b"\x00loader\x00" in open("/proc/%d/cmdline" % pid, "rb").read():
                out.append(pid)
        except OSError:
            pass
    return out


def check_coverage(run, train):
    for split, n in (("train", train), ("test", 400)):
        for e in zp.epoch_ends(run, split):
            zp.check(e["samples"] == n and e["distinct"] == n and
                     e["index_checksum"] == zp.index_checksum(range(n)),
                     "%s epoch %d: %d samples, %d distinct" % (split, e["epoch"], e["samples"], e["distinct"]))


def same_batches(a, b):
    for split in ("train", "test"):
        ea, eb = zp.epoch_ends(a, split), zp.epoch_ends(b, split)
        zp.check(len(ea) == len(eb), "%s: %d vs %d epochs" % (split, len(ea), len(eb)))
        for x, y in zip(ea, eb):
            zp.check(x["order_digest"] == y["order_digest"] and x["loss"] == y["loss"],
                     "%s epoch %d differs from the undisturbed run" % (split, x["epoch"]))


def fifty_kills_and_a_stopped_loader_lose_no_sample():
    with zp.Workdir() as w:
        fmt = dict(train=2000, cost=500, workers=4, epochs=40)  # outlasts 50 kills on a loaded machine
        # the same samples without the cost (it does not change them): fast
        clean = w.write("clean.yaml", CONFIG.format(name="clean", **dict(fmt, cost=0)))
        rc, out, err = w.run("up", clean)
        zp.check(rc == 0, err)
        cfg = w.write("f.yaml", CONFIG.format(name="faults", **fmt))
        p = w.start("up", cfg)
        run = w.run_dir("faults")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "metrics.jsonl")) and
                    any(m.get("event") == "step" for m in zp.metrics(run)), 30, "training to start")
        kills, rng, killed = 0, random.Random(5), set()
        stopped = loader_pids(w)[0]
        os.kill(stopped, signal.SIGSTOP)  # silent for 1 s: past 3 x 100 ms
        stop_until = time.time() + 1.0
        while p.poll() is None and kills < 50:
            if stopped and time.time() > stop_until:
                os.kill(stopped, signal.SIGCONT)
                stopped = None
            # a killed loader may take a while to exit on a loaded machine: never count one twice
            pids = [x for x in loader_pids(w) if x != stopped and x not in killed]
            if len(pids) >= 2:  # leave one working, so that the run goes on
                victim = rng.choice(pids)
                try:
                    os.kill(victim, signal.SIGKILL)
                    killed.add(victim)
                    kills += 1
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        if stopped:
            os.kill(stopped, signal.SIGCONT)
        out, err = p.communicate(timeout=240)
        zp.check(kills >= 50, "the run ended after %d kills (exit %d); make it longer\n%s" %
                 (kills, p.returncode, err[-3000:]))
        zp.check(p.returncode == 0, "exit %d\n%s" % (p.returncode, err[-3000:]))
        # every kill is a restart, but the last one may land as the run ends
        zp.check(err.count("restarting it in") >= kills - 1, "%d restarts after %d kills:\n%s" %
                 (err.count("restarting it in"), kills, err[-3000:]))
        check_coverage(run, 2000)
        same_batches(w.run_dir("clean"), run)
        rep = json.load(open(os.path.join(run, "report.json")))
        zp.check(rep["loaders_lost"] >= 25 and rep["tasks_requeued"] > 0,
                 "lost %d, re-queued %d" % (rep["loaders_lost"], rep["tasks_requeued"]))
        zp.check("Loaders lost" in open(os.path.join(run, "report.txt")).read(), "report.txt")


def stat_loaders(w, run):
    rc, out, err = w.run("stat", run, "--json")
    if rc != 0:
        return -1
    return sum(1 for s in json.loads(out)["stages"] if s["stage"] == "loader")


def scaling_from_1_to_4_and_back_to_1_keeps_coverage():
    with zp.Workdir() as w:
        cfg = w.write("s.yaml", CONFIG.format(name="scale", train=4000, cost=500, workers=1, epochs=6))
        p = w.start("up", cfg)
        run = w.run_dir("scale")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "metrics.jsonl")) and
                    any(m.get("event") == "step" for m in zp.metrics(run)), 30, "training to start")
        rc, out, err = w.run("scale", "scale", "loader=4")
        zp.check(rc == 0, err)
        zp.wait_for(lambda: stat_loaders(w, run) == 4, 10, "stat to show 4 loaders")
        zp.check(len(loader_pids(w)) == 4, "4 loader processes")
        rc, out, err = w.run("scale", "scale", "loader=-3")
        zp.check(rc == 0, err)
        zp.wait_for(lambda: stat_loaders(w, run) == 1 and len(loader_pids(w)) == 1, 10,
                    "stat to show 1 loader")
        rc, out, err = w.run("scale", "scale", "loader=0")
        zp.check(rc == 2 and "within 1..256" in err, err)
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, "exit %d\n%s" % (p.returncode, err[-3000:]))
        zp.check(err.count("retired") == 3, err)
        check_coverage(run, 4000)
        zp.check(len(zp.epoch_ends(run, "train")) == 6, "epochs")


def corrupt_samples_are_skipped_and_counted_or_stop_the_run():
    with zp.Workdir() as w:
        cfg = w.write("c.yaml", CONFIG.format(name="skip", train=1000, cost=0, workers=2, epochs=2)
                      + "cache: {enabled: true, path: skip-cache}\n")
        rc, out, err = w.run("up", cfg, "dataset.synthetic.corrupt_every=97", "loader.on_error=skip")
        zp.check(rc == 0, err)
        run = w.run_dir("skip")
        for split, n in (("train", 1000), ("test", 400)):
            bad = [i for i in range(n) if (i + 1) % 97 == 0]
            good = [i for i in range(n) if (i + 1) % 97]
            for e in zp.epoch_ends(run, split):
                zp.check(e["skipped"] == len(bad) and e["samples"] == len(good) == e["distinct"] and
                         e["expected_samples"] == n and e["index_checksum"] == zp.index_checksum(good),
                         "%s epoch %d: %s" % (split, e["epoch"], e))
        rep = json.load(open(os.path.join(run, "report.json")))
        listed = sorted((s["split"], s["index"]) for s in rep["skipped_samples"])
        want = sorted([("train", i) for i in range(1000) if (i + 1) % 97 == 0] +
                      [("test", i) for i in range(400) if (i + 1) % 97 == 0])
        zp.check(listed == want, listed)
        zp.check(rep["skips"] == 2 * len(want), "each epoch skips them again: %d" % rep["skips"])
        zp.check("synthetic train sample 96: corrupt" in rep["skipped_samples"][0]["error"] or
                 any("train sample 96: corrupt" in s["error"] for s in rep["skipped_samples"]), rep)
        zp.check("Skipped samples" in open(os.path.join(run, "report.txt")).read(), "report.txt")
        # every sample skipped: batches of none go through and free their slots
        rc, out, err = w.run("up", cfg, "run.name=none", "dataset.synthetic.corrupt_every=1",
                             "loader.on_error=skip", "trainer.epochs=1", "cache.enabled=false")
        zp.check(rc == 0, err)
        e = zp.epoch_ends(w.run_dir("none"), "train")
        zp.check(len(e) == 1 and e[0]["samples"] == 0 and e[0]["skipped"] == 1000, e)
        rc, out, err = w.run("up", cfg, "run.name=stop", "dataset.synthetic.corrupt_every=97")
        zp.check(rc == 1, "exit %d" % rc)
        logs = "".join(open(os.path.join(w.run_dir("stop"), "logs", f)).read()
                       for f in os.listdir(os.path.join(w.run_dir("stop"), "logs")))
        zp.check("synthetic train sample" in logs and ": corrupt" in logs, logs[-2000:])
        zp.check("synthetic train sample" in err, "the cause is not in the supervisor's output:\n" + err)


if __name__ == "__main__":
    zp.main([fifty_kills_and_a_stopped_loader_lose_no_sample,
             scaling_from_1_to_4_and_back_to_1_keeps_coverage,
             corrupt_samples_are_skipped_and_counted_or_stop_the_run])
