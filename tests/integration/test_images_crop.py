"""The crop at assembly (dataset.augment.resized_crop on an image folder):
the cache keeps each train image whole, its longer side at most
dataset.image.cache_side, and every epoch's random-resized crop and flip are
made from it as the sample is copied into its ring slot.

Proved here: the box follows torchvision's RandomResizedCrop rule (area and
aspect histograms over many draws, the centred fallback); the resize of a box
matches Pillow's resize(box=) within 1 per channel on average and 2 at most,
the flip included; a run's crops are Pillow's crops of the very images its
cache keeps (RGB, grayscale, CMYK, a PNG smaller than the crop), the same for 1
and 4 loaders and readers, cold and warm, and close to them with the cache
off (the same boxes, decoded at another DCT scale); batches.log lists each
sample's crop, the box drawn for it on its cached image, the same whatever
the loaders, readers or cache state; cache.encoding jpeg keeps
them within JPEG's error; a cache of another cache_side or encoding is
refused by its fingerprint. Exits 77 (skipped) where /usr/bin/python3 has no
torch or torchvision."""
import json
import math
import os
import random
import struct
import subprocess
import sys
import zp

try:
    import lmdb
    import numpy as np
    import torch
    from PIL import Image
    from torchvision.transforms import RandomResizedCrop
except ImportError as e:
    print("skipped: %s" % e)
    sys.exit(77)

TOOL = os.path.join(os.path.dirname(zp.BIN), "zp-crop-tool")
PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)
SIDE, CROP, SEED = 64, 24, 3


def tool(*args):
    p = subprocess.run([TOOL] + [str(a) for a in args], capture_output=True, text=True)
    zp.check(p.returncode == 0, "zp-crop-tool %s: %s" % (args[:1], p.stderr))
    return p.stdout


def draws(h, w, n, epoch=0, seed=SEED, scale=SCALE, ratio=RATIO):
    """{index: (y, x, h, w, flip)} as zp_rrc_draw makes them."""
    out = {}
    rows = tool("draws", h, w, seed, epoch, n, scale[0], scale[1], ratio[0], ratio[1]).splitlines()
    for r in rows:
        i, y, x, bh, bw, flip = map(int, r.split())
        out[i] = (y, x, bh, bw, flip)
    return out


def histogram(values, lo, hi, bins=10):
    h = [0] * bins
    for v in values:
        h[min(bins - 1, max(0, int((v - lo) / (hi - lo) * bins)))] += 1
    return [c / len(values) for c in h]


def the_box_follows_torchvision_rule():
    n = 20000
    for ih, iw in ((240, 320), (320, 90), (40, 320)):  # the last one falls back often
        mine = list(draws(ih, iw, n).values())
        torch.manual_seed(1)
        theirs = [RandomResizedCrop.get_params(torch.empty(1, ih, iw), list(SCALE), list(RATIO))
                  for _ in range(n)]
        for what, f, lo, hi in (("area", lambda b: b[2] * b[3] / (ih * iw), 0, 1),
                                ("log aspect", lambda b: math.log(b[3] / b[2]), -0.4, 0.4)):
            a = histogram([f(b) for b in mine], lo, hi)
            t = histogram([f(b) for b in theirs], lo, hi)
            worst = max(abs(x - y) for x, y in zip(a, t))
            zp.check(worst < 0.02, "%dx%d %s histogram: %s vs torchvision %s" % (ih, iw, what,
                                                                                   a, t))
        # the fallback: its share, and its box, are torchvision's
        fh, fw = ih, min(iw, round(ih * RATIO[1])) if iw / ih > RATIO[1] else iw
        if iw / ih < RATIO[0]:
            fh = round(iw / RATIO[0])
        fb = ((ih - fh) // 2, (iw - fw) // 2, fh, fw)
        share_mine = sum(b[:4] == fb for b in mine) / n
        share_theirs = sum(tuple(b) == fb for b in theirs) / n
        zp.check(abs(share_mine - share_theirs) < 0.01, "%dx%d fallback share %.4f vs torchvision %.4f"
                 % (ih, iw, share_mine, share_theirs))
    # a box that never fits is the centred fallback, as torchvision's
    only = set(b[:4] for b in draws(10, 100, 50, scale=(0.9, 1.0)).values())
    want = tuple(RandomResizedCrop.get_params(torch.empty(1, 10, 100), [0.9, 1.0], list(RATIO)))
    zp.check(only == {want}, "fallback %s, torchvision %s" % (only, want))
    flips = sum(b[4] for b in mine) / n
    zp.check(abs(flips - 0.5) < 0.02, "flip share %.3f" % flips)


def resize_like_pil(w, img, box, ow, oh, flip):
    src = os.path.join(w.path, "in.rgb")
    out = os.path.join(w.path, "out.rgb")
    img.save(src[:-4] + ".png")
    with open(src, "wb") as f:
        f.write(img.tobytes())
    x, y, bw, bh = box
    tool("resample", src, img.width, img.height, x, y, bw, bh, ow, oh, 1 if flip else 0, out)
    with open(out, "rb") as f:
        mine = np.frombuffer(f.read(), np.uint8).reshape(oh, ow, 3).astype(int)
    ref = img.resize((ow, oh), Image.BILINEAR, box=(x, y, x + bw, y + bh))
    if flip:
        ref = ref.transpose(Image.FLIP_LEFT_RIGHT)
    return mine, np.asarray(ref).astype(int)


def close(a, b, mean=1.0, most=2):
    d = np.abs(a - b)
    return d.mean() <= mean and d.max() <= most, "mean %.3f max %d" % (d.mean(), d.max())


def the_resize_of_a_box_matches_pillow():
    rng = np.random.default_rng(5)
    # smooth content with texture, as photographs
    yy, xx = np.mgrid[0:71, 0:97]
    base = np.stack([(xx * 3 + yy) % 256, (yy * 4) % 256, (xx * yy // 7) % 256], -1)
    img = Image.fromarray(np.clip(base + rng.integers(0, 40, base.shape), 0, 255).astype(np.uint8))
    with zp.Workdir() as w:
        cases = [((0, 0, 97, 71), 48, 35, 0), ((0, 0, 97, 71), 200, 150, 0), ((10, 5, 50, 40), 24, 24, 1),
                 ((3, 7, 8, 6), 24, 24, 0), ((20, 0, 77, 71), 24, 24, 1), ((0, 30, 97, 20), 13, 31, 0)]
        for box, ow, oh, flip in cases:
            ok, how = close(*resize_like_pil(w, img, box, ow, oh, flip))
            zp.check(ok, "box %s -> %dx%d flip %d: %s" % (box, ow, oh, flip, how))
        a, _ = resize_like_pil(w, img, (10, 5, 50, 40), 24, 24, 0)
        b, _ = resize_like_pil(w, img, (10, 5, 50, 40), 24, 24, 1)
        zp.check((a[:, ::-1] == b).all(), "the flip is not a mirror of the unflipped crop")


MAKE = [("big", "RGB", 200, 150, "jpg"), ("tall", "RGB", 90, 300, "png"), ("gray", "L", 120, 100, "jpg"),
        ("cmyk", "CMYK", 160, 120, "jpg"), ("tiny", "RGB", 12, 9, "png"), ("wide", "RGB", 320, 60, "jpg")]


def make_folder(root):
    rng = random.Random(7)
    for split, per in (("train", 3), ("val", 1)):
        for cls in ("a", "b"):
            d = os.path.join(root, split, cls)
            os.makedirs(d)
            for name, mode, w, h, ext in MAKE:
                for i in range(per):
                    yy, xx = np.mgrid[0:h, 0:w]
                    px = np.stack([(xx * 2 + rng.randrange(40)) % 256, (yy * 3) % 256,
                                   (xx + yy) % 256], -1).astype(np.uint8)
                    im = Image.fromarray(px).convert(mode) if mode != "RGB" else Image.fromarray(px)
                    im.save(os.path.join(d, "%s%d.%s" % (name, i, ext)), quality=92)


CONFIG = """
run: {{name: {name}}}
seed: %d
dataset:
  source: image_folder
  path: {root}
  dtype: uint8
  image: {{resize: 32, crop: %d, cache_side: %d}}
  augment: {{resized_crop: true, hflip: true}}
cache: {{enabled: {cache}, path: {cache_path}, encoding: {encoding}, on_mismatch: error}}
loader: {{workers: {loaders}, task_size: 4}}
prefetch: {{batch_size: 8, readers: {readers}}}
trainer:
  epochs: 2
  command: [{python}, consumer.py, {name}.pt{mode}]
""" % (SEED, CROP, SIDE)

# The consumer: every train batch's (epoch, indices, pixels) into NAME.pt. With
# "cut STATE" it stops after 2 batches of epoch 1 and saves its data position;
# with "resume STATE" it goes on from that position to the run's end.
CONSUMER = """
import json, sys, torch, zeus_pipe
mode = sys.argv[2] if len(sys.argv) > 2 else "all"
out = []
with zeus_pipe.attach(raw=True) as zp:  # the uint8 crops themselves, against Pillow's
    first = 0
    if mode == "resume":
        zp.load_state_dict(json.load(open(sys.argv[3])))
        first = 1
    for epoch in range(first, 2):
        for x, y in zp.train:
            out.append((epoch, zp.indices.tolist(), x.clone()))
            if mode == "cut" and epoch == 1 and len(out) == 2 + len(zp.train):
                json.dump(zp.state_dict(), open(sys.argv[3], "w"))
                torch.save(out, sys.argv[1])
                sys.exit(0)
        for x, y in zp.test:
            pass
torch.save(out, sys.argv[1])
"""


def up(w, name, cache="true", loaders=1, readers=1, encoding="raw", side=None, cache_dir=None, mode=""):
    from test_python import python_command
    w.write("consumer.py", CONSUMER)
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, root=os.path.join(w.path, "img"), cache=cache,
                                                cache_path=os.path.join(w.path, "cache-" + (cache_dir or encoding)),
                                                encoding=encoding, loaders=loaders, readers=readers,
                                                python=python_command(),
                                                mode=", " + mode if mode else ""))
    extra = ["dataset.image.cache_side=%d" % side] if side else []
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE))
    p = w.start("up", cfg, *extra, env=env)
    out, err = p.communicate(timeout=240)
    return p.returncode, err


def crops(w, name, **kw):
    """{(epoch, index): CHW uint8 array} of a run."""
    rc, err = up(w, name, **kw)
    zp.check(rc == 0, "%s: exit %d:\n%s" % (name, rc, err[-3000:]))
    got = {}
    for epoch, idx, x in torch.load(os.path.join(w.path, name + ".pt")):
        for i, px in zip(idx, x.numpy()):
            got[epoch, i] = px.astype(int)
    return got


def cached_images(w, encoding):
    """{index: PIL image} of the train split's values, checked as whole images."""
    env = lmdb.open(os.path.join(w.path, "cache-" + encoding), readonly=True, lock=False, max_dbs=8)
    with env.begin() as txn:
        names = [k.decode() for k, _ in txn.cursor() if k.decode().endswith("/train")]
    db = env.open_db(names[0].encode(), create=False)
    out = {}
    with env.begin() as txn:
        for k, v in txn.cursor(db=db):
            magic, ver, dtype, ndim, layout, c, h, wd, label, index, nbytes = struct.unpack("<4sBBBBIIIiII", v[:32])
            zp.check((magic, ver, dtype, layout, c) == (b"ZPC1", 4, 2, 1 if encoding == "raw" else 2, 3),
                     "value header %s" % ((magic, ver, dtype, layout, c),))
            zp.check(max(h, wd) <= SIDE, "a cached image of %dx%d, cache_side %d" % (wd, h, SIDE))
            body = bytes(v[48:48 + nbytes])
            if layout == 1:
                out[index] = Image.frombytes("RGB", (wd, h), body)
            else:
                import io
                out[index] = Image.open(io.BytesIO(body)).convert("RGB")
                zp.check(out[index].size == (wd, h), "a JPEG of another size than its header's")
    env.close()
    return out


def reference(images, epoch, index):
    img = images[index]
    y, x, bh, bw, flip = draws(img.height, img.width, index + 1, epoch=epoch)[index]
    ref = img.resize((CROP, CROP), Image.BILINEAR, box=(x, y, x + bw, y + bh))
    if flip:
        ref = ref.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(ref).astype(int).transpose(2, 0, 1)


def runs_crop_the_cached_images_as_pillow_does():
    with zp.Workdir() as w:
        make_folder(os.path.join(w.path, "img"))
        cold = crops(w, "cold", loaders=1, readers=1)  # epoch 0 from the loader, epoch 1 from the cache
        images = cached_images(w, "raw")
        zp.check(len(images) == 2 * 3 * len(MAKE), "cached %d train images" % len(images))
        sizes = sorted(set(im.size for im in images.values()))
        zp.check((12, 9) in sizes and (64, 48) in sizes and (19, 64) in sizes, "cached sizes %s" % sizes)
        for (epoch, i), px in cold.items():
            ok, how = close(px, reference(images, epoch, i))
            zp.check(ok, "epoch %d sample %d against Pillow: %s" % (epoch, i, how))
        rc, out, err = w.run("cache", "stat", os.path.join(w.path, "cache-raw"), "--json")
        train = [d for d in json.loads(out)["databases"] if d["name"].endswith("/train")]
        zp.check(rc == 0 and train and train[0]["samples"] == 36 and train[0]["bytes_per_sample"] > 0
                 and train[0]["projected_bytes"] == 36 * train[0]["bytes_per_sample"], "cache stat: %s" % out)
        rc, out, err = w.run("cache", "stat", os.path.join(w.path, "cache-raw"))
        zp.check(rc == 0 and "%d bytes a sample" % train[0]["bytes_per_sample"] in out, out)
        gray = [i for i, im in images.items() if np.ptp(np.asarray(im).astype(int)[..., :3], axis=-1).max() == 0]
        zp.check(len(gray) >= 6, "grayscale images cached as R = G = B: %d" % len(gray))
        warm = crops(w, "warm", loaders=4, readers=4)
        zp.check(warm.keys() == cold.keys(), "other samples warm")
        zp.check(all((warm[k] == cold[k]).all() for k in cold), "warm with 4 readers: other pixels than cold")
        zp.check(any((cold[0, i] != cold[1, i]).any() for i in images), "the same crop every epoch")
        off = crops(w, "off", cache="false", loaders=4)
        diffs = []
        for k, px in off.items():  # the same box from the file itself, at another DCT scale
            diffs.append(np.abs(px - cold[k]).mean())
            zp.check(diffs[-1] < 8, "cache off, sample %s: mean difference %.1f from the cached crop"
                     % (k, diffs[-1]))
        zp.check(off.keys() == cold.keys() and np.mean(diffs) < 2,
                 "cache off: mean difference %.2f from the cached crops" % np.mean(diffs))


def jpeg_encoding_round_trips_and_fingerprints_refuse():
    with zp.Workdir() as w:
        make_folder(os.path.join(w.path, "img"))
        raw = crops(w, "raw", loaders=2, readers=2)
        jpg = crops(w, "jpg", loaders=2, readers=2, encoding="jpeg")
        a, b = cached_images(w, "raw"), cached_images(w, "jpeg")
        for i in a:
            d = np.abs(np.asarray(a[i]).astype(int) - np.asarray(b[i]).astype(int)).mean()
            zp.check(d < 6, "image %d: jpeg differs from raw by %.2f on average" % (i, d))
        for (epoch, i), px in jpg.items():
            if epoch == 0:  # a miss: cropped from the image before it was encoded
                zp.check((px == raw[0, i]).all(), "jpeg, cold: sample %d is not the raw run's crop" % i)
                continue
            ok, how = close(px, reference(b, epoch, i))  # a hit: from the decoded JPEG
            zp.check(ok, "jpeg: epoch %d sample %d against Pillow: %s" % (epoch, i, how))
            d = np.abs(px - raw[epoch, i]).mean()
            zp.check(d < 12, "jpeg vs raw crop of sample %d: %.2f" % (i, d))
        # a cache of another cache_side or encoding is refused before the run starts
        rc, err = up(w, "side", side=48)
        zp.check(rc == 2 and "kept: whole images, longer side at most 64" in err
                 and "at most 48" in err, "cache_side: exit %d %s" % (rc, err[-1500:]))
        rc, err = up(w, "enc", encoding="jpeg", cache_dir="raw")
        zp.check(rc == 2 and "raw RGB" in err and "jpeg quality 90" in err,
                 "encoding: exit %d %s" % (rc, err[-1500:]))


def a_resumed_run_crops_the_rest_of_the_epoch_as_an_uninterrupted_one():
    with zp.Workdir() as w:
        make_folder(os.path.join(w.path, "img"))
        whole = crops(w, "whole", loaders=2, readers=2)
        state = os.path.join(w.path, "state.json")
        first = crops(w, "first", cache="false", loaders=1, mode="cut, " + state)
        rest = crops(w, "rest", loaders=3, readers=4, mode="resume, " + state)
        zp.check(not first.keys() & rest.keys() and first.keys() | rest.keys() == whole.keys(),
                 "resumed: %d + %d samples, uninterrupted %d" % (len(first), len(rest), len(whole)))
        zp.check(all((rest[k] == whole[k]).all() for k in rest),
                 "the resumed epoch's crops differ from the uninterrupted run's")


LOGGED = """
run: {{name: {name}}}
seed: %d
dataset:
  source: image_folder
  path: {root}
  dtype: uint8
  image: {{resize: 32, crop: %d, cache_side: %d}}
  augment: {{resized_crop: true, hflip: true}}
cache: {{enabled: {cache}, path: {cache_path}}}
loader: {{workers: {loaders}, task_size: 4}}
prefetch: {{batch_size: 8, shuffle: false, readers: {readers}}}
trainer: {{backend: null, epochs: 2, debug: {{log_batches: true}}}}
""" % (SEED, CROP, SIDE)


def logged_crops(w, name, cache, loaders, readers):
    """{(epoch, index): (x, y, w, h, flip, image_w, image_h)} from a run's
    batches.log (no shuffle: batch b's sample k is index 8b + k)."""
    cfg = w.write(name + ".yaml", LOGGED.format(name=name, root=os.path.join(w.path, "img"), cache=cache,
                                                cache_path=os.path.join(w.path, "cache-raw"),
                                                loaders=loaders, readers=readers))
    rc, out, err = w.run("up", cfg)
    zp.check(rc == 0, "%s: exit %d:\n%s" % (name, rc, err[-3000:]))
    got = {}
    for line in open(os.path.join(w.run_dir(name), "batches.log")):
        f = line.split()
        zp.check(len(f) > 6 and f[5] == "crops", "%s: no crops in %r" % (name, line))
        for k, c in enumerate(f[6:]):
            zp.check(c != "-", "%s: an unknown crop in %r" % (name, line))
            got[int(f[0]), 8 * int(f[1]) + k] = tuple(map(int, c.split(",")))
    return got


def batches_log_lists_each_crop_as_drawn_whatever_loaders_readers_or_cache():
    with zp.Workdir() as w:
        make_folder(os.path.join(w.path, "img"))
        runs = {name: logged_crops(w, name, cache, loaders, readers)
                for name, cache, loaders, readers in (("off", "false", 1, 1), ("cold", "true", 1, 1),
                                                      ("warm", "true", 4, 4))}
        images = cached_images(w, "raw")
        zp.check(len(runs["cold"]) == 2 * len(images), "%d crops logged for %d images in 2 epochs"
                 % (len(runs["cold"]), len(images)))
        table = {}
        for (epoch, index), c in sorted(runs["cold"].items()):
            img = images[index]
            zp.check(c[5:] == (img.width, img.height), "index %d: crop on %dx%d, cached %dx%d"
                     % (index, c[5], c[6], img.width, img.height))
            key = (img.height, img.width, epoch)
            if key not in table:
                table[key] = draws(img.height, img.width, len(images), epoch=epoch)
            y, x, bh, bw, flip = table[key][index]
            zp.check(c[:5] == (x, y, bw, bh, flip), "epoch %d index %d: logged %s, drawn %s"
                     % (epoch, index, c[:5], (x, y, bw, bh, flip)))
        for name in ("off", "warm"):
            zp.check(runs[name] == runs["cold"], "%s: other crops than cold: %s" % (
                name, sorted(set(runs[name].items()) ^ set(runs["cold"].items()))[:6]))


if __name__ == "__main__":
    zp.main([the_box_follows_torchvision_rule, the_resize_of_a_box_matches_pillow,
             runs_crop_the_cached_images_as_pillow_does, jpeg_encoding_round_trips_and_fingerprints_refuse,
             a_resumed_run_crops_the_rest_of_the_epoch_as_an_uninterrupted_one,
             batches_log_lists_each_crop_as_drawn_whatever_loaders_readers_or_cache])
