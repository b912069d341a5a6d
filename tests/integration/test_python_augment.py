"""Cache the decode, not the draw: a Python Dataset's random part runs after
the cache. A __getitem__ that draws random numbers with the cache on is
refused before any stage starts (or kept on purpose with
dataset.python.random: cache_first_draw); an augment step
(dataset.python.augment.train/test) runs in the Python loaders on every
sample of every epoch, cold and warm, seeded from (seed, split, epoch,
index): fresh draws each epoch, the same draws whatever the number of
loaders or a loader SIGKILLed mid-epoch, and no __getitem__ call once the
cache holds a sample. Exits 77 (skipped) where /usr/bin/python3 has no numpy."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import zp

PYTHON = sys.executable
PACKAGE, DATA = zp.PACKAGE, zp.PYDATA
sys.path.insert(0, PACKAGE)
sys.path.insert(0, DATA)

CONFIG = """
run: {{name: {name}}}
seed: 5
dataset:
  source: python
  python:
    class: zp_test_data:{cls}
    path: [{data}]
    args: {args}
    splits: {{train: {{}}, test: {{n: 70}}}}
    fields: [image, label, draw]
    augment: {augment}
    interpreter: {python}
loader: {{workers: {workers}, task_size: 16, heartbeat_ms: 1000, liveness: 5}}
prefetch: {{batch_size: 32, depth: 2}}
cache: {{enabled: {cache}, path: {cache_path}}}
trainer:
  epochs: {epochs}
  command: [{python}, consumer.py, {out}]
"""

# Every sample's draw (y, x, flip) and a digest of its pixels, per split and epoch.
CONSUMER = """
import hashlib, json, sys, zeus_pipe
seen = []
with zeus_pipe.attach(raw=True) as zp:
    for epoch in range(int(sys.argv[2])):
        for name, src in (("train", zp.train), ("test", zp.test)):
            for b in src:
                image, label, draw = (b[k] for k in ("image", "label", "draw")) if isinstance(b, dict) else b
                for k, i in enumerate(zp.indices.tolist()):
                    seen.append((name, epoch, i, draw[k].tolist(),
                                 hashlib.sha1(image[k].contiguous().numpy().tobytes()).hexdigest(),
                                 int(label[k])))
json.dump(seen, open(sys.argv[1], "w"))
"""


def env():
    return zp.python_env()


def config(w, name, cls="Pictures", args=None, augment=None, workers=2, cache="true",
           epochs=3, cache_path="cache"):
    calls = os.path.join(w.path, name + ".calls")
    os.makedirs(calls, exist_ok=True)
    out = os.path.join(w.path, name + ".json")
    return w.write(name + ".yaml", CONFIG.format(
        name=name, cls=cls, data=DATA, args=args or "{n: 300, calls: %s}" % calls,
        augment=augment or "{train: 'zp_test_data:crop8', test: 'zp_test_data:center8'}",
        python=PYTHON, workers=workers, cache=cache, cache_path=cache_path, epochs=epochs,
        out="%s, %d" % (out, epochs)))


def up(w, cfg, *over, timeout=240):
    p = w.start("up", cfg, *over, env=env())
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def getitem_calls(w, name):
    folder = os.path.join(w.path, name + ".calls")
    calls = []
    for f in os.listdir(folder):
        calls += [int(x) for x in zp.text(os.path.join(folder, f)).split()]
    return calls


def expected(split, epoch, index):
    """The draw and pixels the step makes of sample `index`, drawn here."""
    import zp_test_data as d
    from zeus_pipe._dataset import sample_seed, seed_all
    seed_all(sample_seed(5, split, epoch, index))
    image, label, draw = (d.crop8 if split == "train" else d.center8)((d.picture(index), index % 5))
    return draw.tolist(), hashlib.sha1(image.tobytes()).hexdigest(), label


def check_seen(w, name, n, epochs):
    """Every sample once per epoch, each its seeded draw; the train draws by sample."""
    seen = json.load(open(os.path.join(w.path, name + ".json")))
    draws = {}
    for split, count in (("train", n), ("test", 70)):
        for epoch in range(epochs):
            got = sorted(s[2] for s in seen if s[0] == split and s[1] == epoch)
            zp.check(got == list(range(count)), "%s epoch %d: %d samples, %d distinct, want %d"
                     % (split, epoch, len(got), len(set(got)), count))
    for split, epoch, i, draw, digest, label in seen:
        want = expected(split, epoch, i)
        zp.check((draw, digest, label) == want, "%s epoch %d sample %d: draw %r, want %r (pixels "
                 "%s)" % (split, epoch, i, draw, want[0], "same" if digest == want[1] else "differ"))
        if split == "train":
            draws[(epoch, i)] = tuple(draw)
    return draws


def a_random_getitem_with_the_cache_on_is_refused_before_any_stage_starts():
    with zp.Workdir() as w:
        w.write("consumer.py", "import zeus_pipe\nwith zeus_pipe.attach() as zp:\n"
                "    [b for b in zp.train]; [b for b in zp.test]\n")
        text = ("run: {name: noisy}\ndataset:\n  source: python\n  python:\n"
                "    class: zp_test_data:Noisy\n    path: [%s]\n    interpreter: %s\n"
                "cache: {enabled: true, path: cache}\ntrainer: {epochs: 1, command: [%s, consumer.py]}\n"
                % (DATA, PYTHON, PYTHON))
        cfg = w.write("noisy.yaml", text)
        for cmd in ("up", "warm"):
            p = w.start(cmd, cfg, env=env())
            out, err = p.communicate(timeout=120)
            zp.check(p.returncode == 2, "%s: exit %d, want 2:\n%s" % (cmd, p.returncode, err[-2000:]))
            for want in ("noisy.yaml: dataset.python.class zp_test_data:Noisy: __getitem__ draws "
                         "random numbers", "would keep each sample's first draw",
                         "dataset.python.augment.train", "cache.enabled: false",
                         "dataset.python.random: cache_first_draw"):
                zp.check(want in err, "%s: no %r in:\n%s" % (cmd, want, err[-2000:]))
            zp.check(not os.path.exists(os.path.join(w.run_dir("noisy"), "logs")),
                     "%s: a stage started" % cmd)
        # a remote loader of that Dataset is refused the same way, before it connects
        rc, out, err = w.run("keygen", "far")
        zp.check(rc == 0, err)
        p = w.start("loader", "--connect", "127.0.0.1:9", "--server-key", "far.pub", "--key",
                    "far.key", cfg, env=env())
        out, err = p.communicate(timeout=120)
        zp.check(p.returncode == 2 and "__getitem__ draws random numbers" in err,
                 "remote loader: exit %d:\n%s" % (p.returncode, err[-2000:]))
        rc, out, err = up(w, cfg, "dataset.python.random=cache_first_draw")
        zp.check(rc == 0, "cache_first_draw: exit %d:\n%s" % (rc, err[-2000:]))
        rc, out, err = up(w, cfg, "cache.enabled=false")
        zp.check(rc == 0, "cache off: exit %d:\n%s" % (rc, err[-2000:]))
        # a deterministic __getitem__ with the cache on is not refused
        rc, out, err = up(w, config(w, "plain", epochs=1))
        zp.check(rc == 0, "deterministic: exit %d:\n%s" % (rc, err[-2000:]))


def the_step_draws_afresh_each_epoch_from_the_cache_the_same_with_1_and_3_loaders():
    with zp.Workdir() as w:
        w.write("consumer.py", CONSUMER)
        runs = {}
        for name, workers in (("one", 1), ("three", 3)):
            rc, out, err = up(w, config(w, name, workers=workers, cache_path=name + "-cache"))
            zp.check(rc == 0, "%s: exit %d:\n%s" % (name, rc, err[-3000:]))
            runs[name] = check_seen(w, name, 300, 3)
            calls = getitem_calls(w, name)
            zp.check(sorted(calls) == sorted(list(range(300)) + list(range(70))),
                     "%s: %d __getitem__ calls over 3 epochs, want 370 (one per sample, none "
                     "warm)" % (name, len(calls)))
            meta = zp.text(os.path.join(w.run_dir(name), "dataset", "meta"))
            zp.check("fields 3 tuple\nfield image uint8 3 3 8 8\n" in meta and
                     "augment 1 1\ncached\nfields 2 tuple\nfield image uint8 3 3 16 16\n" in meta,
                     "%s: meta:\n%s" % (name, meta))
            cache = [m for m in zp.metrics(w.run_dir(name)) if m.get("event") == "cache"
                     and m["split"] == "train"]
            zp.check([(c["hits"], c["misses"]) for c in cache] == [(0, 300), (300, 0), (300, 0)],
                     "%s: the train split's cache records: %r" % (name, cache))
        zp.check(runs["one"] == runs["three"], "the draws differ between 1 and 3 loaders")
        fresh = sum(runs["one"][(0, i)] != runs["one"][(1, i)] for i in range(300))
        # 81 crops x 2 flips: two epochs' draws of a sample agree by chance 1 time in 162
        zp.check(fresh >= 290, "only %d of 300 samples drew another crop in epoch 2" % fresh)
        # the same config again (runs/one-2), on the warm cache: no __getitem__, same draws
        rc, out, err = up(w, os.path.join(w.path, "one.yaml"))
        zp.check(rc == 0, "again: exit %d:\n%s" % (rc, err[-3000:]))
        zp.check(len(getitem_calls(w, "one")) == 370, "the warm run called __getitem__ %d times"
                 % (len(getitem_calls(w, "one")) - 370))
        zp.check(check_seen(w, "one", 300, 3) == runs["one"], "the warm run drew otherwise")


def a_loader_killed_mid_epoch_changes_no_sample_and_no_draw():
    with zp.Workdir() as w:
        w.write("consumer.py", CONSUMER)
        cfg = config(w, "kill", workers=3, args="{n: 600, cost_ms: 4, calls: %s}"
                     % os.path.join(w.path, "kill.calls"))
        p = w.start("up", cfg, env=env())
        run = w.run_dir("kill")
        killed, end = 0, time.time() + 90
        while p.poll() is None and time.time() < end and killed < 4:
            time.sleep(0.5)
            pids = subprocess.run(["pgrep", "-f", "zeus_pipe._loader_process --run %s" % run],
                                  capture_output=True, text=True).stdout.split()
            if pids:
                os.kill(int(pids[killed % len(pids)]), signal.SIGKILL)
                killed += 1
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, "up exited %d after %d kills:\n%s" % (p.returncode, killed,
                                                                          err[-3000:]))
        zp.check(killed >= 1, "no loader was killed")
        check_seen(w, "kill", 600, 3)


# Every train sample's pixels, digested, per epoch.
PHOTO_CONSUMER = """
import hashlib, json, sys, zeus_pipe
seen = {}
with zeus_pipe.attach() as zp:
    for epoch in range(3):
        for x, y in zp.train:
            assert x.dtype.is_floating_point and tuple(x.shape[1:]) == (3, 32, 32), x.shape
            for k, i in enumerate(zp.indices.tolist()):
                seen["%d/%d" % (epoch, i)] = hashlib.sha1(x[k].numpy().tobytes()).hexdigest()
        n = sum(len(y) for x, y in zp.test)
json.dump(seen, open(sys.argv[1], "w"))
"""


def the_workshop_dataset_with_torchvisions_crop_after_the_cache():
    """Photos (PIL decode + resize in __getitem__) and torchvision's
    RandomResizedCrop + flip as the train step: a fresh crop of (nearly)
    every image each epoch, the same crops with 1 and 3 loaders, and no
    __getitem__ once an image is cached."""
    try:
        subprocess.run([PYTHON, "-c", "import torchvision, PIL"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        print("(no torchvision or PIL in %s: the workshop Dataset is not run)" % PYTHON)
        return
    examples = os.path.join(os.path.dirname(PACKAGE), "python", "examples")
    with zp.Workdir() as w:
        w.write("consumer.py", PHOTO_CONSUMER)
        seen = {}
        for name, workers in (("one", 1), ("three", 3)):
            calls = os.path.join(w.path, name + ".calls")
            os.makedirs(calls)
            cfg = w.write(name + ".yaml", (
                "run: {name: %s}\nseed: 3\ndataset:\n  source: python\n  python:\n"
                "    class: zp_test_data:counted_photos\n    path: [%s, %s]\n"
                "    args: {root: %s, calls: %s}\n    splits: {train: {}, test: {split: val}}\n"
                "    augment: {train: 'zp_test_data:photo_crop32', test: 'zp_test_data:photo_center32'}\n"
                "    interpreter: %s\nloader: {workers: %d, heartbeat_ms: 1000, liveness: 5}\n"
                "prefetch: {batch_size: 16}\n"
                "cache: {enabled: true, path: %s-cache}\n"
                "trainer: {epochs: 3, command: [%s, consumer.py, %s.json]}\n")
                % (name, DATA, examples, os.path.join(w.path, "photos"), calls, PYTHON, workers,
                   name, PYTHON, name))
            rc, out, err = up(w, cfg)
            zp.check(rc == 0, "%s: exit %d:\n%s" % (name, rc, err[-3000:]))
            seen[name] = json.load(open(os.path.join(w.path, name + ".json")))
            zp.check(len(seen[name]) == 3 * 60, "%s: %d train samples seen, want 180"
                     % (name, len(seen[name])))
            n = sum(len(zp.text(os.path.join(calls, f)).split()) for f in os.listdir(calls))
            zp.check(n == 60 + 15, "%s: %d __getitem__ calls over 3 epochs, want 75 (each image "
                     "once, none warm)" % (name, n))
        zp.check(seen["one"] == seen["three"], "the crops differ between 1 and 3 loaders")
        for a, b in ((0, 1), (1, 2)):
            same = sum(seen["one"]["%d/%d" % (a, i)] == seen["one"]["%d/%d" % (b, i)]
                       for i in range(60))
            zp.check(same <= 2, "%d of 60 images had epoch %d's crop again in epoch %d"
                     % (same, a + 1, b + 1))


TOOL = os.path.join(os.path.dirname(zp.BIN), "zp-crop-tool")

# Every sample's image field as the program gets it: raw uint8, or normalised
# float32 by the package (dataset.python.normalize: image).
FIELD_CONSUMER = """
import json, sys, zeus_pipe
raw = sys.argv[2] == "raw"
device = "cuda" if sys.argv[2] == "cuda" else None
seen = []
with zeus_pipe.attach(raw=raw, device=device) as zp:
    for epoch in range(3):
        for name, src in (("train", zp.train), ("test", zp.test)):
            for image, label in src:
                image, label = image.cpu(), label.cpu()
                for k, i in enumerate(zp.indices.tolist()):
                    seen.append((name, epoch, i, image[k].flatten().tolist(), int(label[k])))
json.dump(seen, open(sys.argv[1], "w"))
"""

FIELD_CONFIG = """
run: {{name: {name}}}
seed: 7
dataset:
  source: python
  python:
    class: zp_test_data:Pictures
    path: [{data}]
    args: {{n: 200, hwc: {hwc}}}
    splits: {{train: {{}}, test: {{n: 40}}}}
    interpreter: {python}
    normalize: image
  augment: {augment}
  mean: [0.5]
  std: [0.25]
loader: {{workers: {workers}, task_size: 16}}
prefetch: {{batch_size: 32}}
cache: {{enabled: {cache}, path: {name}-cache}}
trainer: {{epochs: 3, command: [{python}, consumer.py, {name}.json, {mode}]}}
"""


def tool(*args):
    p = subprocess.run([TOOL] + [str(a) for a in args], capture_output=True, text=True)
    zp.check(p.returncode == 0, "zp-crop-tool %s: %s" % (args[:1], p.stderr))
    return [[int(v) for v in line.split()] for line in p.stdout.splitlines()]


def resized(w, image_hwc, box, size, flip):
    """zp-crop-tool's resize of box (y, x, h, w) of an RGB image to size x size."""
    import numpy as np
    src, dst = os.path.join(w.path, "tool.in"), os.path.join(w.path, "tool.out")
    np.ascontiguousarray(image_hwc).tofile(src)
    y, x, h, bw = box
    tool("resample", src, image_hwc.shape[1], image_hwc.shape[0], x, y, bw, h, size, size, flip, dst)
    return np.fromfile(dst, np.uint8).reshape(size, size, 3)


def padded(image_hwc, dy, dx, flip, p):
    """The padded crop: output (y, x) is input (y + dy - p, x' + dx - p), x'
    mirrored when flip, black outside."""
    import numpy as np
    h, w, _ = image_hwc.shape
    big = np.zeros((h + 2 * p, w + 2 * p, 3), np.uint8)
    big[p:p + h, p:p + w] = image_hwc
    out = big[dy:dy + h, dx:dx + w]
    return out[:, ::-1] if flip else out


def check_field_run(w, name, expect, raw, hwc):
    import numpy as np
    import zp_test_data as d
    seen = json.load(open(os.path.join(w.path, name + ".json")))
    for split, count in (("train", 200), ("test", 40)):
        for epoch in range(3):
            got = sorted(s[2] for s in seen if s[0] == split and s[1] == epoch)
            zp.check(got == list(range(count)), "%s: %s epoch %d: %d samples, %d distinct"
                     % (name, split, epoch, len(got), len(set(got))))
    bad = []
    for split, epoch, i, pixels, label in seen:
        want = expect(split, epoch, i, d.picture(i).transpose(1, 2, 0))  # HWC
        want = want if hwc else want.transpose(2, 0, 1)
        got = np.array(pixels)
        ok = np.array_equal(got, want.flatten()) if raw else \
            np.allclose(got, (want.flatten() / 255.0 - 0.5) / 0.25, atol=1e-5)
        if not ok or label != i % 5:
            bad.append((split, epoch, i))
    zp.check(not bad, "%s: %d of %d samples are not the independent draw, first %r"
             % (name, len(bad), len(seen), bad[:3]))
    return seen


def the_built_in_crop_of_a_python_field_is_the_independent_draw_for_each_consumer():
    """dataset.augment.resized_crop + hflip to 8 x 8 on a 3 x 16 x 16 field:
    every train sample of 3 epochs (cold, then made by the prefetch readers
    from the cache) is zp-crop-tool's draw of (seed, epoch, index) resized
    by zp-crop-tool, raw=True, normalised by the package on the CPU and, with
    a GPU, by device="cuda"; the test split is the whole image resized."""
    draws = {e: {r[0]: r[1:] for r in tool("draws", 16, 16, 7, e, 200, 0.08, 1.0, 0.75, 1.3333333)}
             for e in range(3)}

    def expect(split, epoch, i, image):
        if split == "test":
            return resized(w, image, (0, 0, 16, 16), 8, 0)
        y, x, h, bw, flip = draws[epoch][i]
        return resized(w, image, (y, x, h, bw), 8, flip)

    modes = [("rawpx", "raw"), ("norm", "normalised")]
    if subprocess.run([PYTHON, "-c", "import torch, sys; sys.exit(not torch.cuda.is_available())"],
                      capture_output=True).returncode == 0:
        modes.append(("gpu", "cuda"))  # the field made on the GPU, normalised there
    with zp.Workdir() as w:
        w.write("consumer.py", FIELD_CONSUMER)
        for name, mode in modes:
            cfg = w.write(name + ".yaml", FIELD_CONFIG.format(
                name=name, data=DATA, hwc="false", python=PYTHON, workers=2, cache="true",
                mode=mode, augment="{resized_crop: true, hflip: true, size: 8}"))
            rc, out, err = up(w, cfg)
            zp.check(rc == 0, "%s: exit %d:\n%s" % (name, rc, err[-3000:]))
            meta = zp.text(os.path.join(w.run_dir(name), "dataset", "meta"))
            zp.check("field image uint8 3 3 8 8\n" in meta and "augment 2 2\ncached\n" in meta,
                     "%s: meta:\n%s" % (name, meta))
            seen = check_field_run(w, name, expect, mode == "raw", False)
            cache = [m for m in zp.metrics(w.run_dir(name)) if m.get("event") == "cache"
                     and m["split"] == "train"]
            zp.check([(c["hits"], c["misses"]) for c in cache] == [(0, 200), (200, 0), (200, 0)],
                     "%s: the train split's cache records: %r" % (name, cache))
        fresh = {}
        for split, epoch, i, pixels, label in seen:
            if split == "train":
                fresh.setdefault(i, []).append(pixels)
        same = sum(v[0] == v[1] for v in fresh.values())
        zp.check(same <= 4, "%d of 200 samples had the same crop in epochs 1 and 2" % same)


def a_padded_crop_of_an_hwc_field_is_the_same_with_1_and_3_loaders_and_the_cache_off():
    """crop_padding 3 + hflip on a 16 x 16 x 3 field: the draw of
    zp_augment_draw (zp-crop-tool pdraws), black outside, for 1 loader with
    the cache on and 3 loaders with it off."""
    draws = {e: {r[0]: r[1:] for r in tool("pdraws", 16, 16, 7, e, 200, 3)} for e in range(3)}

    def expect(split, epoch, i, image):
        if split == "test":
            return image
        dy, dx, flip = draws[epoch][i]
        return padded(image, dy, dx, flip, 3)

    with zp.Workdir() as w:
        w.write("consumer.py", FIELD_CONSUMER)
        for name, workers, cache in (("one", 1, "true"), ("three", 3, "false")):
            cfg = w.write(name + ".yaml", FIELD_CONFIG.format(
                name=name, data=DATA, hwc="true", python=PYTHON, workers=workers, cache=cache,
                mode="raw", augment="{crop_padding: 3, hflip: true}"))
            rc, out, err = up(w, cfg)
            zp.check(rc == 0, "%s: exit %d:\n%s" % (name, rc, err[-3000:]))
            check_field_run(w, name, expect, True, True)


if __name__ == "__main__":
    zp.main_needing(['numpy', 'torch'], [a_random_getitem_with_the_cache_on_is_refused_before_any_stage_starts,
                    the_step_draws_afresh_each_epoch_from_the_cache_the_same_with_1_and_3_loaders,
                    a_loader_killed_mid_epoch_changes_no_sample_and_no_draw,
                    the_workshop_dataset_with_torchvisions_crop_after_the_cache,
                    the_built_in_crop_of_a_python_field_is_the_independent_draw_for_each_consumer,
                    a_padded_crop_of_an_hwc_field_is_the_same_with_1_and_3_loaders_and_the_cache_off])
