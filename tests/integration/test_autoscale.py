"""loader.autoscale on real pipelines. A synthetic dataset whose cost_us one
loader cannot keep up with starts at 1 loader and ends with 2 (the
supervisor's autoscale records in metrics.jsonl say so, with their figures),
every epoch exactly once, and the trainer waits for data less in the last
epoch than in the window that made the supervisor add a loader; with a warm
cache the idle loaders retire to loader.min_workers, exactly once still; a
loader that cannot start is reported once, withdrawn, and none is added after.

The trainer is the client example (tests/client_example.c) sleeping
ZP_EXAMPLE_BATCH_US per batch: a step that takes time without a CPU, so
that on a 2-core machine two loaders can outrun it where one cannot (a cpu
trainer would compete with the loaders for the same two cores)."""
import json
import os
import zp

EXAMPLE = os.path.join(os.path.dirname(zp.BIN), "zp-client-example")

# One loader: 32 samples x 2 ms = 500 samples/s. The trainer: a batch of 32
# every 50 ms = 640 samples/s. Two loaders: 1000 samples/s.
CONFIG = """
run: {{name: {name}}}
seed: 3
dataset:
  source: synthetic
  synthetic: {{train_samples: 2000, test_samples: 0, shape: [1, 8, 8], classes: 4, cost_us: 2000}}
cache: {{enabled: {cache}, path: cache}}
loader:
  workers: {workers}
  task_size: 32
  autoscale: true
  min_workers: 1
  max_workers: 2
  autoscale_interval_s: 1
  autoscale_wait: 0.10
prefetch: {{batch_size: 32, depth: 2}}
trainer:
  epochs: {epochs}
  command: [{example}]
logger: {{stat_interval_ms: 250}}
"""

STEP_US = "50000"


def run(w, name, **fields):
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, example=EXAMPLE, **fields))
    p = w.start("up", cfg, env=dict(os.environ, ZP_EXAMPLE_BATCH_US=STEP_US))
    out, err = p.communicate(timeout=180)
    zp.check(p.returncode == 0, "%s: exit %d:\n%s" % (name, p.returncode, err[-3000:]))
    return w.run_dir(name), err


def decisions(run_dir):
    return [m for m in zp.metrics(run_dir) if m.get("event") == "autoscale"]


def check_exactly_once(run_dir, epochs=None):
    """Every train epoch proved once: `epochs` of them, or (None) those that
    ended before the run was brought down, at least one."""
    ends = zp.epoch_ends(run_dir, "train")
    epochs = epochs if epochs is not None else max(len(ends), 1)
    zp.check(sorted(e["epoch"] for e in ends) == list(range(epochs)),
             "train epochs recorded: %s" % [e["epoch"] for e in ends])
    for e in ends:
        zp.check(e["samples"] == e["distinct"] == e["expected_samples"] == 2000,
                 "epoch %d: %d samples, %d distinct, %d expected" %
                 (e["epoch"], e["samples"], e["distinct"], e["expected_samples"]))


def trainer_wait(run_dir, start, end):
    """The trainer's share of [start, end] spent waiting for data, from its
    stats records (each covers window_s before its time)."""
    wait = span = 0.0
    with open(os.path.join(run_dir, "stats.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["stage"] == "trainer" and start + r["window_s"] <= r["time"] <= end + 0.05:
                wait += r["wait_in"] * r["window_s"]
                span += r["window_s"]
    zp.check(span > 0, "no trainer stats records between %.1f and %.1f" % (start, end))
    return wait / span


def a_loader_too_slow_for_the_trainer_gets_a_second_one():
    with zp.Workdir() as w:
        run_dir, err = run(w, "slow", cache="false", workers=1, epochs=3)
        zp.check("1..2 loader(s)" in err and "starting with 1" in err, err[-3000:])
        ds = decisions(run_dir)
        added = [d for d in ds if d["change"] == 1]
        zp.check(added and added[0]["workers_before"] == 1 and added[0]["workers_after"] == 2,
                 "no loader added: %s" % ds)
        first = added[0]
        zp.check(first["stage"] == "supervisor" and first["wait"] > first["wait_threshold"] == 0.1
                 and first["busy"] >= 0.6 and first["reason"], "the decision's figures: %s" % first)
        zp.check(all(d["workers_after"] <= 2 for d in ds), "past max_workers: %s" % ds)
        zp.check(not [d for d in ds if d["change"] == -1], "a busy loader retired: %s" % ds)
        check_exactly_once(run_dir, 3)
        last = zp.epoch_ends(run_dir, "train")[-1]
        end = last["time"]
        wait = trainer_wait(run_dir, end - last["seconds"], end)
        zp.check(wait < first["wait"], "the trainer waited %.0f%% in the last epoch, %.0f%% when "
                 "a loader was added" % (100 * wait, 100 * first["wait"]))
        with open(os.path.join(run_dir, "report.txt")) as f:
            report = f.read()
        zp.check("Loader autoscale" in report and "1 -> 2" in report, report[-2000:])
        with open(os.path.join(run_dir, "report.html")) as f:
            page = f.read()
        zp.check("<h2>Loader autoscale</h2>" in page and "<td>1 &rarr; 2</td>" in page,
                 "report.html has no autoscale section")
        with open(os.path.join(run_dir, "report.json")) as f:
            listed = json.load(f)["autoscale"]
        zp.check([d["change"] for d in listed] == [d["change"] for d in ds], listed)
        print("last epoch: the trainer waited %.1f%% for data (threshold 10%%; %.1f%% when the "
              "loader was added)" % (100 * wait, 100 * first["wait"]))


def idle_loaders_over_a_warm_cache_retire_to_the_minimum():
    with zp.Workdir() as w:
        cfg = w.write("warm.yaml", CONFIG.format(name="warm", cache="true", workers=2, epochs=2,
                                                  example=EXAMPLE))
        rc, out, err = w.run("warm", cfg)
        zp.check(rc == 0, "warm: exit %d:\n%s" % (rc, err[-3000:]))
        # a long run, brought down once the idle loader retired: how soon that comes
        # depends on the machine, not whether
        hot = w.write("hot.yaml", CONFIG.format(name="hot", cache="true", workers=2, epochs=50,
                                                example=EXAMPLE))
        p = w.start("up", hot, env=dict(os.environ, ZP_EXAMPLE_BATCH_US=STEP_US))
        run_dir = w.run_dir("hot")
        zp.wait_for(lambda: os.path.exists(os.path.join(run_dir, "metrics.jsonl")) and
                    any(d["change"] == -1 for d in decisions(run_dir)) and
                    len(zp.epoch_ends(run_dir, "train")) >= 2, 120, "a loader retired, and 2 epochs")
        rc, out, err = w.run("down", run_dir)
        zp.check(rc == 0, err)
        out, err = p.communicate(timeout=120)
        zp.check(p.returncode == 3, "hot: exit %d after down:\n%s" % (p.returncode, err[-3000:]))
        ds = decisions(run_dir)
        retired = [d for d in ds if d["change"] == -1]
        zp.check(len(retired) == 1 and retired[0]["workers_before"] == 2 and
                 retired[0]["workers_after"] == 1 and retired[0]["busy"] < 0.25,
                 "loaders not retired to 1: %s" % ds)
        zp.check(not [d for d in ds if d["change"] == 1], "a loader added: %s" % ds)
        zp.check("loader[1] retired" in err, err[-3000:])
        check_exactly_once(run_dir)
        hits = [m for m in zp.metrics(run_dir) if m.get("event") == "cache"]
        zp.check(hits and all(m["misses"] == 0 for m in hits), "the cache was not warm: %s" % hits)


# A stage wrapper under which loader 1 (the one autoscale adds) fails on start.
FAILING = """#!/bin/sh
case "$*" in *"stage loader"*"--instance 1 "*|*"stage loader"*"--instance 1") exit 1;; esac
exec "$@"
"""


def a_loader_that_cannot_start_is_reported_once_and_not_retried():
    with zp.Workdir() as w:
        wrapper = w.write("wrapper.sh", FAILING)
        os.chmod(wrapper, 0o755)
        cfg = w.write("fail.yaml", CONFIG.format(name="fail", cache="false", workers=1, epochs=3,
                                                  example=EXAMPLE).replace("max_workers: 2",
                                                                           "max_workers: 3"))
        p = w.start("up", cfg, env=dict(os.environ, ZP_EXAMPLE_BATCH_US=STEP_US,
                                        ZP_STAGE_WRAPPER=wrapper))
        out, err = p.communicate(timeout=180)
        zp.check(p.returncode == 0, "exit %d:\n%s" % (p.returncode, err[-3000:]))
        ds = decisions(w.run_dir("fail"))
        failed = [d for d in ds if "loader[1] exited before delivering" in d["reason"]]
        zp.check(len(failed) == 1 and failed[0]["workers_after"] == 1,
                 "the failed start, once: %s" % ds)
        zp.check([d["change"] for d in ds if d["change"] == 1] == [1],
                 "a loader added after the failure: %s" % ds)
        said = err.find("loader.autoscale: loader[1] exited before delivering")
        zp.check(said > 0 and "loader[1] exited with status 1" in err[:said], err[-3000:])
        zp.check("loader[1] exited with status 1" not in err[said:],
                 "loader[1] tried again after the failure was reported:\n%s" % err[said - 500:])
        check_exactly_once(w.run_dir("fail"), 3)


if __name__ == "__main__":
    zp.main([a_loader_too_slow_for_the_trainer_gets_a_second_one,
             idle_loaders_over_a_warm_cache_retire_to_the_minimum,
             a_loader_that_cannot_start_is_reported_once_and_not_retried])
