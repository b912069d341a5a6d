"""A PyTorch user's second hour, as issue reports found it, each case as the
newcomer met it: `up` after `zeus-pipe down` exits 3 (not 0) and says where
the run goes on; a program that trains fewer epochs than trainer.epochs ends
"run finished", saying so, never "stopped by signal 15"; a Python Dataset's
uint8 field arrives as the Dataset made it (no statistics borrowed from
Fashion-MNIST), and asking for normalisation without the dataset's own
statistics is refused; the default cache is one folder per dataset under
$XDG_CACHE_HOME (node-local under Slurm), printed as it starts; messages
that misled (a Python item's error called a corrupt file, fields printed as
bare numbers, a label's offset of 2**64 - 1, a dataset.python.path that does
not exist, an attach mark left in logs/); a trainer python without torch,
named before any stage starts; and a raw cache of whole images over 4x its
JPEGs, named with cache.encoding: jpeg. Exits 77 (skipped) where
/usr/bin/python3 has no torch or numpy."""
import json
import os
import subprocess
import sys

import zp

PYTHON = sys.executable
MAKE_IMAGES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                           "make_images.py")

SYNTHETIC = """
run: {{name: {name}}}
seed: 3
dataset:
  source: synthetic
  synthetic: {{train_samples: {n}, test_samples: 64, shape: [1, 4, 4], classes: 2, cost_us: {cost}}}
loader: {{workers: 1, task_size: 16}}
prefetch: {{batch_size: 16}}
trainer:
  epochs: {epochs}
  checkpoint: {{every_steps: 5}}
{command}
"""


def own_env():
    """A script's environment that uses this build's zeus-pipe and library
    (not the checkout's build/, which the package tries before ZP_BIN)."""
    return dict(zp.python_env(), ZP_BIN=zp.BIN,
                ZP_LIBRARY=os.path.join(os.path.dirname(zp.BIN), "libzeuspipe.so"))


def run_stderr(w, *args, env=None, timeout=240):
    p = w.start(*args, env=env or zp.python_env())
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def up_after_down_exits_3_and_says_where_the_run_goes_on():
    with zp.Workdir() as w:
        cfg = w.write("d.yaml", SYNTHETIC.format(name="downed", n=2000, cost=2000, epochs=3,
                                                 command=""))
        p = w.start("up", cfg)
        run = w.run_dir("downed")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "checkpoints", "last.ckpt")), 120,
                    "the first checkpoint")
        rc, out, err = w.run("down", run, timeout=60)
        zp.check(rc == 0 and "stopped" in out, "down: exit %d\n%s" % (rc, err))
        out, err = p.communicate(timeout=60)
        zp.check(p.returncode == 3, "up exited %d after down, want 3:\n%s" % (p.returncode, err[-2000:]))
        last = err.strip().splitlines()[-1]
        zp.check(last.startswith("zeus-pipe: stopped by zeus-pipe down (exit status 3): " + run) and
                 "zeus-pipe up --resume " + run in last and "its last checkpoint goes on at epoch 1"
                 in last, last)
        zp.check("run finished" not in err, err[-2000:])
        # the command it names works: the run goes on to its end
        rc, out, err = w.run("up", "--resume", run, timeout=240)
        zp.check(rc == 0 and "run finished" in err, "up --resume: exit %d\n%s" % (rc, err[-2000:]))


SHORT = """
import sys, zeus_pipe
kw = dict(config=sys.argv[1], timeout_s=120) if len(sys.argv) > 1 else {}
with zeus_pipe.attach(**kw) as zp:
    for epoch in range(2):  # trainer.epochs is 4
        for x, y in zp.train:
            pass
        for x, y in zp.test:
            pass
print("trained 2 epochs", file=sys.stderr)
"""


def a_program_of_fewer_epochs_than_the_config_ends_finished_and_says_so():
    with zp.Workdir() as w:
        w.write("short.py", SHORT)
        cfg = w.write("s.yaml", SYNTHETIC.format(
            name="short", n=400, cost=0, epochs=4, command="  command: [%s, short.py]" % PYTHON))
        rc, out, err = run_stderr(w, "up", cfg)
        run = w.run_dir("short")
        zp.check(rc == 0 and "run finished" in err, "up: exit %d\n%s" % (rc, err[-2000:]))
        zp.check("trainer[0]'s program ended after epoch 2 of 4: the pipeline's last 2 epoch(s) "
                 "were not read" in err, err[-2000:])
        zp.check("signal" not in err, err[-2000:])
        logs = os.listdir(os.path.join(run, "logs"))
        zp.check("trainer-0.attached" not in logs, "the attach mark outlived the run: %s" % logs)
        prefetch = zp.text(os.path.join(run, "logs", "prefetch-0.log"))
        zp.check(" error " not in prefetch, prefetch[-2000:])

        # Python-first: the script starts the pipeline itself, and leaves it after 2 epochs
        w.write("first.yaml", SYNTHETIC.format(name="first", n=400, cost=0, epochs=4, command=""))
        script = w.write("first.py", "import sys; sys.path.insert(0, %r)\n" % zp.PACKAGE + SHORT)
        p = subprocess.run([PYTHON, script, "first.yaml"], cwd=w.path, env=own_env(),
                           capture_output=True, text=True, timeout=240)
        zp.check(p.returncode == 0 and "trained 2 epochs" in p.stderr,
                 "script: exit %d\n%s" % (p.returncode, p.stderr[-2000:]))
        log = zp.text(os.path.join(w.run_dir("first"), "logs", "supervisor.log"))
        zp.check("ended after epoch 2 of 4" in log and "run finished" in log and "signal" not in log,
                 log[-2000:])


# argv: RUN MODE. "raise": three train batches, then an exception.
ATTACHED = """
import sys, zeus_pipe
run, mode = sys.argv[1], sys.argv[2]
with zeus_pipe.attach(run=run, rank=0, timeout_s=60) as zp:
    for i, (x, y) in enumerate(zp.train):
        if mode == "raise" and i == 2:
            raise RuntimeError("a bug in the loop")
    for x, y in zp.test:
        pass
"""


def a_program_that_raises_mid_epoch_is_not_taken_for_one_that_ended_its_loop():
    with zp.Workdir() as w:
        cfg = w.write("a.yaml", SYNTHETIC.format(name="att", n=400, cost=0, epochs=4, command=""))
        p = w.start("up", "--attach", cfg, env=zp.python_env())
        first = p.stdout.readline().strip()
        zp.check(first.startswith("ZP_RUN="), "up --attach said %r" % first)
        run = first[len("ZP_RUN="):]
        script = w.write("attached.py", ATTACHED)
        mark = os.path.join(run, "logs", "trainer-0.attached")
        crashed = subprocess.run([PYTHON, script, run, "raise"], cwd=w.path, env=own_env(),
                                 capture_output=True, text=True, timeout=120)
        zp.check(crashed.returncode == 1 and "a bug in the loop" in crashed.stderr, crashed.stderr)
        zp.check(not zp.text(mark).startswith("left"), "a crash read as a clean leave: %r" % zp.text(mark))
        rc, out, err = w.run("down", run, timeout=60)  # not finished: it waits, as for a crash
        zp.check(rc == 0, "down: exit %d (had the run ended by itself?)\n%s" % (rc, err))
        out, err = p.communicate(timeout=60)
        zp.check(p.returncode == 3 and "run finished" not in err,
                 "up --attach: exit %d\n%s" % (p.returncode, err[-2000:]))


FIELDS = """
run: {{name: {name}}}
dataset:
  source: python
  python:
    class: zp_test_data:Fields
    path: [{data}]
    args: {{n: 64}}
    splits: {{train: {{}}, test: {{n: 16}}}}
    interpreter: {python}
{extra}
loader: {{workers: 1, task_size: 16}}
prefetch: {{batch_size: 16}}
trainer:
  epochs: 1
  command: [{python}, fields.py, {device}]
"""

# What the program gets of the image field: its dtype and whether every value
# is index % 256, as Fields made it; on the GPU too where one is.
FIELDS_PROGRAM = """
import json, sys, torch, zeus_pipe
device = sys.argv[1] if sys.argv[1] != "cpu" else None
seen = []
with zeus_pipe.attach(device=device) as zp:
    labels = [f for f in zp.fields]
    for b in zp.train:
        img = b["image"]
        want = (zp.indices % 256).to(img.device)
        seen.append((str(img.dtype), str(img.device.type),
                     bool(torch.equal(img[:, 0, 2, 3].to(torch.int64), want))))
json.dump(seen, open("fields.json", "w"))
"""


def a_python_datasets_uint8_field_arrives_as_the_dataset_made_it():
    import torch
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if len(devices) == 1:
        print("  no GPU here: the device=\"cuda\" half is left to a machine with one")
    with zp.Workdir() as w:
        w.write("fields.py", FIELDS_PROGRAM)
        for device in devices:
            cfg = w.write("f.yaml", FIELDS.format(name="f-" + device, data=zp.PYDATA, python=PYTHON,
                                                  extra="", device=device))
            rc, out, err = run_stderr(w, "up", cfg)
            zp.check(rc == 0, "up: exit %d\n%s" % (rc, err[-2000:]))
            seen = json.load(open(os.path.join(w.path, "fields.json")))
            zp.check(seen and all(s == ["torch.uint8", device, True] for s in seen),
                     "%s: %s" % (device, seen[:3]))
        # asked for normalisation without the dataset's statistics: refused, naming the key
        cfg = w.write("n.yaml", FIELDS.format(name="n", data=zp.PYDATA, python=PYTHON,
                                              extra="    normalize: image", device="cpu"))
        rc, out, err = run_stderr(w, "up", cfg)
        zp.check(rc == 2 and "dataset.python.normalize" in err and "dataset.mean" in err and
                 "Fashion" not in err, "exit %d\n%s" % (rc, err))
        zp.check(not os.path.exists(w.run_dir("n")), "a run folder was made for a refused config")


def config_value(w, cfg, key, env):
    """`key` as `zeus-pipe config CFG` resolves it under exactly `env`."""
    p = subprocess.run([zp.BIN, "config", cfg], cwd=w.path, env=env, capture_output=True, text=True)
    zp.check(p.returncode == 0, p.stderr)
    out = p.stdout
    section, name = key.split(".")
    inside = False
    for line in out.splitlines():
        if not line.startswith(" "):
            inside = line.rstrip(":") == section
        elif inside and line.strip().startswith(name + ":"):
            return line.split(":", 1)[1].strip().strip('"')
    raise AssertionError("no %s in:\n%s" % (key, out))


def the_default_cache_is_a_folder_per_dataset_where_users_keep_caches():
    with zp.Workdir() as w:
        xdg = os.path.join(w.path, "xdg")
        env = dict(os.environ, XDG_CACHE_HOME=xdg)
        for k in ("SLURM_JOB_ID", "SLURM_TMPDIR", "TMPDIR"):
            env.pop(k, None)
        a = w.write("a.yaml", SYNTHETIC.format(name="a", n=256, cost=0, epochs=1, command=""))
        b = w.write("b.yaml", SYNTHETIC.format(name="b", n=512, cost=0, epochs=1, command=""))
        pa, pb = config_value(w, a, "cache.path", env), config_value(w, b, "cache.path", env)
        zp.check(pa.startswith(xdg + "/zeus-pipe/synthetic-") and pb.startswith(xdg + "/zeus-pipe/")
                 and pa != pb, "two datasets: %s and %s" % (pa, pb))
        os.makedirs(os.path.join(w.path, "elsewhere"))
        again = subprocess.run([zp.BIN, "config", "../a.yaml"], cwd=os.path.join(w.path, "elsewhere"),
                               env=env, capture_output=True, text=True)
        zp.check(pa in again.stdout, "another working folder, another cache:\n%s" % again.stdout)
        home = dict(env, HOME=os.path.join(w.path, "home"))
        home.pop("XDG_CACHE_HOME")
        zp.check(config_value(w, a, "cache.path", home) == pa.replace(xdg, os.path.join(
            w.path, "home", ".cache")), "no XDG_CACHE_HOME: not under ~/.cache")
        # under Slurm: node-local, $SLURM_TMPDIR first, then $TMPDIR, then /tmp; each user's own
        mine = "zeus-pipe-%d/" % os.getuid()
        slurm = dict(env, SLURM_JOB_ID="77", SLURM_TMPDIR="/scratch/job77", TMPDIR="/tmp/job77")
        zp.check(config_value(w, a, "cache.path", slurm).startswith("/scratch/job77/" + mine), slurm)
        slurm.pop("SLURM_TMPDIR")
        zp.check(config_value(w, a, "cache.path", slurm).startswith("/tmp/job77/" + mine), slurm)
        slurm.pop("TMPDIR")
        zp.check(config_value(w, a, "cache.path", slurm).startswith("/tmp/" + mine + "synthetic-"), slurm)
        # a cache folder whose path would not fit is refused, not cut
        rc, out, err = run_stderr(w, "config", a, env=dict(env, XDG_CACHE_HOME="/" + "x" * 250))
        zp.check(rc == 2 and "cache.path: unset" in err and "set cache.path" in err, err)
        # warm and up say where it is; cache stat takes the config
        rc, out, err = run_stderr(w, "warm", a, env=env)
        zp.check(rc == 0 and "zeus-pipe: cache: %s (cache.path unset: the default folder, "
                 "$XDG_CACHE_HOME)" % pa in err, "warm: exit %d\n%s" % (rc, err))
        zp.check(os.path.exists(os.path.join(pa, "data.mdb")), "no LMDB at %s" % pa)
        rc, out, err = run_stderr(w, "up", a, "cache.enabled=true", env=env)
        zp.check(rc == 0 and "zeus-pipe: cache: " + pa in err, "up: exit %d\n%s" % (rc, err[-2000:]))
        rc, out, err = run_stderr(w, "cache", "stat", a, env=env)
        zp.check(rc == 0 and out.startswith(pa + ":") and "256 entries" in out, out + err)


RAGGED = """
run: {{name: ragged}}
dataset:
  source: python
  python:
    class: zp_test_data:Pictures
    path: [{data}]
    args: {{n: 40}}
    splits: {{train: {{}}, test: {{hwc: true}}}}
    interpreter: {python}
trainer: {{epochs: 1}}
"""

BUILTIN_FIELDS = """
import json, zeus_pipe
with zeus_pipe.attach() as zp:
    json.dump([list(f) for f in zp.fields], open("fields.json", "w"))
    for x, y in zp.train:
        pass
    for x, y in zp.test:
        pass
"""


def messages_say_what_happened():
    with zp.Workdir() as w:
        # a Python item's exception is not a corrupt file
        cfg = w.write("e.yaml", FIELDS.format(name="e", data=zp.PYDATA, python=PYTHON,
                                              extra="", device="cpu").replace("{n: 64}", "{n: 64, fail_at: 5}"))
        w.write("fields.py", FIELDS_PROGRAM)
        rc, out, err = run_stderr(w, "up", cfg)
        logs = "".join(zp.text(os.path.join(w.run_dir("e"), "logs", f))
                       for f in os.listdir(os.path.join(w.run_dir("e"), "logs")) if f.endswith(".log"))
        zp.check(rc == 1 and "no sample 5 here" in logs and "corrupt" not in logs + err,
                 "exit %d\n%s" % (rc, logs[-2000:]))
        # fields that differ between the splits, as a person reads them
        rc, out, err = run_stderr(w, "up", w.write("r.yaml", RAGGED.format(data=zp.PYDATA, python=PYTHON)))
        zp.check(rc == 2 and "train: image: uint8 [3, " in err and "test:  image: uint8 [" in err and
                 ", 3], label: int64 []" in err, "exit %d\n%s" % (rc, err))
        # a path on dataset.python.path that is not there
        missing = w.write("m.yaml", FIELDS.format(name="m", data=zp.PYDATA, python=PYTHON, extra="",
                                                  device="cpu").replace("path: [", "path: [no-such-folder, "))
        rc, out, err = run_stderr(w, "up", missing)
        zp.check(rc == 2 and "dataset.python.path: '" in err and "no-such-folder': No such file or "
                 "directory" in err, "exit %d\n%s" % (rc, err))
        # a built-in source's label has no offset in the record
        w.write("builtin.py", BUILTIN_FIELDS)
        cfg = w.write("l.yaml", SYNTHETIC.format(name="l", n=64, cost=0, epochs=1,
                                                 command="  command: [%s, builtin.py]" % PYTHON))
        rc, out, err = run_stderr(w, "up", cfg)
        zp.check(rc == 0, "exit %d\n%s" % (rc, err[-2000:]))
        fields = json.load(open(os.path.join(w.path, "fields.json")))
        zp.check(fields[1][0] == "label" and fields[1][3] is None and fields[0][3] == 0, fields)


def a_trainer_python_without_torch_is_named_before_any_stage_starts():
    with zp.Workdir() as w:
        bin_dir = os.path.join(w.path, "bin")
        os.makedirs(bin_dir)
        fake = os.path.join(bin_dir, "python3")
        with open(fake, "w") as f:  # a python that sees no site packages: no torch
            f.write("#!/bin/sh\nexec %s -I -S \"$@\"\n" % PYTHON)
        os.chmod(fake, 0o755)
        w.write("short.py", SHORT)
        cfg = w.write("t.yaml", SYNTHETIC.format(name="t", n=64, cost=0, epochs=1,
                                                 command="  command: [python3, short.py]"))
        env = dict(zp.python_env(), PATH=bin_dir + ":" + os.environ["PATH"])
        rc, out, err = run_stderr(w, "up", cfg, env=env)
        zp.check(rc == 2 and "trainer.command: %s (the first 'python3' on PATH) has no torch" % fake
                 in err and "PATH=/usr/bin:$PATH" in err, "exit %d\n%s" % (rc, err))
        zp.check(not os.path.exists(w.run_dir("t")), "a run folder was made before the check")


IMAGES = """
run: {{name: {name}}}
dataset:
  source: image_folder
  path: {root}
  dtype: uint8
  image: {{train: train, test: val, resize: 72, crop: 64, cache_side: {side}}}
  augment: {{resized_crop: true}}
cache: {{enabled: true, path: {name}-cache, encoding: {encoding}}}
loader: {{workers: 2}}
prefetch: {{batch_size: 10}}
trainer: {{backend: "null", epochs: 1}}
"""


def a_raw_cache_of_whole_images_over_4x_its_jpegs_names_the_jpeg_encoding():
    with zp.Workdir() as w:
        root = os.path.join(w.path, "img")
        subprocess.run([PYTHON, MAKE_IMAGES, root, "--quick"], check=True, capture_output=True)
        files = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
        said = "cache.encoding: jpeg keeps them as JPEG"
        for name, side, encoding, over in (("big", 512, "raw", True), ("small", 160, "raw", False),
                                           ("jpeg", 512, "jpeg", False)):
            cfg = w.write(name + ".yaml", IMAGES.format(name=name, root=root, side=side,
                                                        encoding=encoding))
            rc, out, err = run_stderr(w, "warm", cfg)
            zp.check(rc == 0, "warm %s: exit %d\n%s" % (name, rc, err[-2000:]))
            zp.check((said in err) == over, "warm %s (%d bytes of files): %s" % (name, files, err[-2000:]))
            if over:  # from the cache's own bytes, over the files'
                line = next(l for l in err.splitlines() if said in l)
                mib = [float(t) for t in line.replace("(", " ").split() if t.replace(".", "").isdigit()]
                zp.check(mib[0] > 4 * mib[1], line)
                rc, out, err = run_stderr(w, "up", cfg)  # a warm cache: said as it starts
                zp.check(rc == 0 and err.count(said) == 1, "up %s: exit %d\n%s" % (name, rc, err[-2000:]))


if __name__ == "__main__":
    zp.main_needing(["torch", "numpy", "PIL"], [
        up_after_down_exits_3_and_says_where_the_run_goes_on,
        a_program_of_fewer_epochs_than_the_config_ends_finished_and_says_so,
        a_program_that_raises_mid_epoch_is_not_taken_for_one_that_ended_its_loop,
        a_python_datasets_uint8_field_arrives_as_the_dataset_made_it,
        the_default_cache_is_a_folder_per_dataset_where_users_keep_caches,
        messages_say_what_happened,
        a_trainer_python_without_torch_is_named_before_any_stage_starts,
        a_raw_cache_of_whole_images_over_4x_its_jpegs_names_the_jpeg_encoding,
    ])
