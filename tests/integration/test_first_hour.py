"""A PyTorch user's first hour, as issue reports found it: `zeus-pipe down`
while a program waits for batches makes its next wait raise ZeusPipeError
saying the run was stopped by `zeus-pipe down` — a Python-first script and a
trainer.command program alike — instead of waiting forever; and a program
started by `up` finds the zeus_pipe package without PYTHONPATH. Exits 77
(skipped) where /usr/bin/python3 has no torch."""
import os
import subprocess
import sys
import time

import zp

PYTHON = sys.executable
PACKAGE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))

CONFIG = """
run: {{name: {name}}}
dataset:
  source: synthetic
  synthetic: {{train_samples: 2000, test_samples: 200, shape: [1, 4, 4], classes: 2, cost_us: 2000}}
loader: {{workers: 1, task_size: 16}}
prefetch: {{batch_size: 16}}
trainer:
  epochs: 50
{command}
"""

# Loops until the run stops; writes where it is, then the error it got.
SCRIPT = """
import os, sys, time, zeus_pipe
out = sys.argv[1]
kw = dict(config="first.yaml", timeout_s=120) if len(sys.argv) > 2 else {}
with zeus_pipe.attach(**kw) as zp:
    open(out + ".run", "w").write(zp.run)
    try:
        for epoch in range(50):
            for i, (x, y) in enumerate(zp.train):
                if not os.path.exists(out + ".going"):
                    open(out + ".going", "w").close()
    except zeus_pipe.ZeusPipeError as e:
        open(out + ".error", "w").write(str(e))
        sys.exit(3)
open(out + ".error", "w").write("no error: the loop ended")
"""


def env():
    e = dict(os.environ, ZP_BIN=zp.BIN,
             ZP_LIBRARY=os.path.join(os.path.dirname(zp.BIN), "libzeuspipe.so"),
             **zp.sanitizer_env())
    e.pop("PYTHONPATH", None)  # the package comes from `up` (a program) or the script's path
    return e


def down_and_check(w, out, proc):
    zp.wait_for(lambda: os.path.exists(out + ".going"), 120, "the first batches")
    run = zp.text(out + ".run").strip()
    rc, o, err = w.run("down", run, timeout=60)
    zp.check(rc == 0, "down: exit %d:\n%s" % (rc, err))
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("the program still waits for a batch 60 s after `zeus-pipe down`")
    said = zp.text(out + ".error") if os.path.exists(out + ".error") else "(nothing)"
    zp.check("stopped by `zeus-pipe down`" in said, "the program's error: %s\n%s" % (
        said, proc.stderr.read()[-3000:] if proc.stderr else ""))


def down_stops_a_python_first_script_with_an_error_not_a_hang():
    with zp.Workdir() as w:
        w.write("first.yaml", CONFIG.format(name="first", command=""))
        script = w.write("script.py", "import sys; sys.path.insert(0, %r)\n" % PACKAGE + SCRIPT)
        out = os.path.join(w.path, "first")
        p = subprocess.Popen([PYTHON, script, out, "start"], cwd=w.path, env=env(),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        w.procs.append(p)
        down_and_check(w, out, p)
        zp.check(p.returncode == 3, "the script exited %d, not by its ZeusPipeError" % p.returncode)


def down_stops_a_trainer_command_program_with_an_error():
    with zp.Workdir() as w:
        out = os.path.join(w.path, "prog")
        w.write("script.py", SCRIPT)  # no sys.path: `up` gives the program the package
        cfg = w.write("prog.yaml", CONFIG.format(
            name="prog", command="  command: [%s, script.py, %s]" % (PYTHON, out)))
        p = w.start("up", cfg, env=env())
        down_and_check(w, out, p)
        o, err = p.communicate(timeout=60)
        zp.check(p.returncode == 3, "up exited %d after down:\n%s" % (p.returncode, err[-2000:]))


EARLY = """
import sys, zeus_pipe
mode = sys.argv[1]
with zeus_pipe.attach(config="early.yaml", timeout_s=120) as zp:
    for epoch in range(2):
        for i, (x, y) in enumerate(zp.train):
            if mode == "break" and epoch == 1 and i == 3:
                break  # the last epoch, left early
        if mode == "break":
            for x, y in zp.test:
                pass
print("done", mode, file=sys.stderr)
"""


def a_loop_that_leaves_early_or_skips_test_ends_without_waiting_for_the_pipeline():
    with zp.Workdir() as w:
        w.write("early.yaml", CONFIG.format(name="early", command="").replace(
            "epochs: 50", "epochs: 2").replace("cost_us: 2000", "cost_us: 0"))
        script = w.write("early.py", "import sys; sys.path.insert(0, %r)\n" % PACKAGE + EARLY)
        for mode in ("break", "trainonly"):
            p = subprocess.run([PYTHON, script, mode], cwd=w.path, env=env(), capture_output=True,
                               text=True, timeout=120)
            zp.check(p.returncode == 0 and "done " + mode in p.stderr, "%s: exit %d:\n%s" % (
                mode, p.returncode, p.stderr[-2000:]))
            # it used to wait 30 s for a pipeline whose prefetch waited for a seek, then say so
            zp.check("did not end" not in p.stderr, "%s: %s" % (mode, p.stderr[-2000:]))


METRICS = """
import zeus_pipe
with zeus_pipe.attach() as zp:
    for epoch in range(2):
        for x, y in zp.train:
            pass
        zp.log("train_epoch", epoch=epoch, loss=1.5 - epoch)          # docs/pytorch.md's way
        for x, y in zp.test:
            pass
        zp.log("test_epoch", epoch=epoch, loss=2.25 - epoch, accuracy=0.5 + epoch / 8)
"""


def a_programs_epoch_metrics_reach_the_report_the_page_and_tensorboard():
    with zp.Workdir() as w:
        w.write("metrics.py", METRICS)
        cfg = w.write("m.yaml", CONFIG.format(name="m", command="  command: [%s, metrics.py]" % PYTHON)
                      .replace("epochs: 50", "epochs: 2").replace("cost_us: 2000", "cost_us: 0"))
        p = w.start("up", cfg, env=env())  # a sanitizer build's runtime for the program too
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, "up: exit %d:\n%s" % (p.returncode, err[-2000:]))
        run = w.run_dir("m")
        rc, out, err = w.run("report", run, "--json")
        zp.check(rc == 0, err)
        import json
        rows = json.loads(out)["epochs"]
        got = [(r["train_loss"], r["train_accuracy"], r["test_loss"], r["test_accuracy"]) for r in rows]
        zp.check(got == [(1.5, None, 2.25, 0.5), (0.5, None, 1.25, 0.625)], "report --json: %r" % got)
        text = zp.text(os.path.join(run, "report.txt"))
        zp.check("1.5000" in text and "2.2500" in text and "0.6250" in text, text[-2000:])
        page = zp.text(os.path.join(run, "report.html"))
        zp.check("2.2500" in page and "0.6250" in page, "report.html's epoch table lacks them")
        tb = b"".join(open(os.path.join(run, "tb", f), "rb").read()
                      for f in os.listdir(os.path.join(run, "tb")))
        zp.check(b"train/loss" in tb and b"test/accuracy" in tb, "no train/ and test/ tags in tb/")
        rc, out, err = w.run("report")  # no run named, none running: the latest
        zp.check(rc == 0 and "the latest: runs/m" in err and "2.2500" in out,
                 "report without RUN: exit %d\n%s" % (rc, err))


DETAILS = """
import json, sys, zeus_pipe
with zeus_pipe.attach(config="folder.yaml", timeout_s=120) as zp:
    out = dict(batch_size=zp.train.batch_size, train=zp.train.samples, test=zp.test.samples,
               epochs=zp.train.epochs, classes=zp.classes, names=zp.class_names,
               shape=list(zp.sample_shape), batches=len(zp.train))
    xb, yb = next(iter(zp.train))  # the usual peek: it uses up epoch 0's train batches
    out["peek"] = list(xb.shape)
    for x, y in zp.train:
        pass
    for x, y in zp.test:
        pass
json.dump(out, open("details.json", "w"))
"""

FOLDER = """
run: {name: folder}
dataset:
  source: image_folder
  path: %s
  image: {train: train, test: val, resize: 8, crop: 8}
  mean: [0.5]
  std: [0.25]
  dtype: uint8
loader: {workers: 1}
prefetch: {batch_size: 4}
trainer: {epochs: 2}
"""


def the_sources_tell_what_dataloader_code_reaches_for_and_a_peek_says_what_it_cost():
    from PIL import Image
    with zp.Workdir() as w:
        root = os.path.join(w.path, "imgs")
        for split, n in (("train", 6), ("val", 2)):
            for name in ("cat", "dog", "emu"):
                os.makedirs(os.path.join(root, split, name))
                for i in range(n):
                    Image.new("RGB", (10, 10), (i * 40, 0, 0)).save(
                        os.path.join(root, split, name, "%d.jpg" % i))
        w.write("folder.yaml", FOLDER % root)
        script = w.write("details.py", "import sys; sys.path.insert(0, %r)\n" % PACKAGE + DETAILS)
        p = subprocess.run([PYTHON, script], cwd=w.path, env=env(), capture_output=True, text=True,
                           timeout=120)
        zp.check(p.returncode == 0, "exit %d:\n%s" % (p.returncode, p.stderr[-2000:]))
        import json
        got = json.load(open(os.path.join(w.path, "details.json")))
        want = dict(batch_size=4, train=18, test=6, epochs=2, classes=3,
                    names=["cat", "dog", "emu"], shape=[3, 8, 8], batches=5, peek=[4, 3, 8, 8])
        zp.check(got == want, "got %r, want %r" % (got, want))
        zp.check("train epoch 0 left after 1 of 5 batches" in p.stderr and
                 "starts epoch 1" in p.stderr, "the peek was not said:\n" + p.stderr[-2000:])


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

BESIDE = """
run: {name: beside, dir: runs}
dataset:
  source: image_folder
  path: ../imgs
  image: {train: train, test: val, resize: 8, crop: 8}
  mean: [0.5]
  std: [0.25]
  dtype: uint8
cache: {enabled: true, path: cache}
loader: {workers: 1}
prefetch: {batch_size: 4}
trainer: {epochs: 1, command: [%s, train.py]}
"""

COUNT = """
import zeus_pipe
with zeus_pipe.attach() as zp:
    n = sum(len(y) for x, y in zp.train)
open("seen.txt", "w").write(str(n))
"""


def relative_paths_in_a_config_are_beside_it_from_any_working_directory():
    # one rule: dataset.path, run.dir, cache.path and trainer.command's program, written in
    # the file, are relative to its folder, wherever `up` is typed from
    from PIL import Image
    with zp.Workdir() as w:
        proj = os.path.join(w.path, "proj")
        conf = os.path.join(proj, "conf")
        for name in ("cat", "dog"):
            for split, n in (("train", 5), ("val", 2)):
                os.makedirs(os.path.join(proj, "imgs", split, name))
                for i in range(n):
                    Image.new("RGB", (10, 10), (i * 40, 0, 0)).save(
                        os.path.join(proj, "imgs", split, name, "%d.jpg" % i))
        os.makedirs(conf)
        with open(os.path.join(conf, "beside.yaml"), "w") as f:
            f.write(BESIDE % PYTHON)
        with open(os.path.join(conf, "train.py"), "w") as f:
            f.write(COUNT)
        elsewhere = os.path.join(w.path, "elsewhere")
        os.makedirs(elsewhere)
        p = subprocess.run([zp.BIN, "up", "../proj/conf/beside.yaml"], cwd=elsewhere, env=env(),
                           capture_output=True, text=True, timeout=120)
        zp.check(p.returncode == 0, "exit %d:\n%s" % (p.returncode, p.stderr[-3000:]))
        zp.check(zp.text(os.path.join(conf, "seen.txt")) == "10", "the program saw %s samples" %
                 zp.text(os.path.join(conf, "seen.txt")))
        run = os.path.join(conf, "runs", "beside")
        zp.check(os.path.isdir(run) and not os.path.exists(os.path.join(elsewhere, "runs")),
                 "the run is not beside the config: %s" % os.listdir(elsewhere))
        zp.check(os.path.exists(os.path.join(conf, "cache", "data.mdb")) and
                 not os.path.exists(os.path.join(elsewhere, "cache")), "the cache is not beside the config")
        saved = zp.text(os.path.join(run, "config.yaml"))
        zp.check('path: "../proj/conf/../imgs"' in saved and 'path: "../proj/conf/cache"' in saved,
                 "the run's config.yaml does not name the files as up used them:\n" + saved)
        # a KEY=VALUE is the shell's argument: relative to the working directory
        p = subprocess.run([zp.BIN, "config", "../proj/conf/beside.yaml", "cache.path=mine"],
                           cwd=elsewhere, env=env(), capture_output=True, text=True, timeout=30)
        zp.check(p.returncode == 0 and 'path: "mine"' in p.stdout, p.stdout + p.stderr)


def the_readmes_switch_from_dataloader_page_runs():
    # its two commands, on a smaller folder (and this interpreter: PATH's may lack torch)
    with zp.Workdir() as w:
        imgs = os.path.join(w.path, "imgs")
        subprocess.run([PYTHON, os.path.join(ROOT, "bench", "make_images.py"), imgs, "--quick"],
                       check=True, capture_output=True, timeout=120)
        p = subprocess.run(
            [zp.BIN, "up", os.path.join(ROOT, "configs", "switch-from-dataloader.yaml"),
             "dataset.path=" + imgs, "cache.path=" + os.path.join(w.path, "cache"),
             "run.dir=" + os.path.join(w.path, "runs"),
             "trainer.command=[%s, ../python/examples/switch_from_dataloader.py]" % PYTHON],
            cwd=w.path, env=env(), capture_output=True, text=True, timeout=240)
        zp.check(p.returncode == 0, "exit %d:\n%s" % (p.returncode, p.stderr[-3000:]))
        run = w.run_dir("switch")
        for split, n in (("train", 40), ("test", 10)):
            ends = zp.epoch_ends(run, split)
            zp.check(len(ends) == 3 and all(e["samples"] == e["distinct"] == n for e in ends),
                     "%s: %r" % (split, ends))
        tests = [m for m in zp.metrics(run) if m.get("event") == "test_epoch"]
        zp.check(len(tests) == 3 and all(0 <= m["accuracy"] <= 1 for m in tests), tests)


if __name__ == "__main__":
    try:
        subprocess.run([PYTHON, "-c", "import torch"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        print("skipped: %s has no torch" % PYTHON)
        sys.exit(77)
    zp.main([down_stops_a_python_first_script_with_an_error_not_a_hang,
             down_stops_a_trainer_command_program_with_an_error,
             a_loop_that_leaves_early_or_skips_test_ends_without_waiting_for_the_pipeline,
             a_programs_epoch_metrics_reach_the_report_the_page_and_tensorboard,
             the_sources_tell_what_dataloader_code_reaches_for_and_a_peek_says_what_it_cost,
             the_readmes_switch_from_dataloader_page_runs,
             relative_paths_in_a_config_are_beside_it_from_any_working_directory])
