"""Image datasets: JPEG (RGB, grayscale, CMYK) and PNG (RGB, palette) decoded
by zeus-pipe's loaders match Debian's python3-pil within +-1, class numbering
matches torchvision's ImageFolder, resize + center crop match an independent
bilinear reference, and corrupt, truncated, empty and non-image files are
reported by path (or skipped and listed). Pixels are read back from the LMDB
cache, where mean 0 and std 1 leave each value at pixel / 255."""
import json
import os
import subprocess
import zp

MAKE = r"""
import sys, os, random
from PIL import Image
root = sys.argv[1]
rng = random.Random(7)
def picture(mode, w=40, h=30):
    im = Image.new("RGB", (w, h))
    px = im.load()
    for y in range(h):
        for x in range(w):  # smooth gradients with some texture: JPEG-friendly but not flat
            px[x, y] = ((x * 6 + rng.randrange(20)) % 256, (y * 8 + rng.randrange(20)) % 256,
                        (x * y + rng.randrange(30)) % 256)
    return im.convert(mode) if mode != "RGB" else im
for split, per in (("train", 3), ("val", 2)):
    for cls in ("cat", "ant", "bee"):  # not in sorted order on purpose
        d = os.path.join(root, split, cls)
        os.makedirs(d)
        for i in range(per):
            picture("RGB").save(os.path.join(d, "r%d.jpg" % i), quality=90)
            picture("L").save(os.path.join(d, "g%d.JPEG" % i), quality=90)
            picture("CMYK").save(os.path.join(d, "c%d.jpeg" % i), quality=90)
            picture("RGB").save(os.path.join(d, "p%d.png" % i))
            picture("P").save(os.path.join(d, "q%d.png" % i))
        open(os.path.join(d, "notes.txt"), "w").write("not an image")
"""

READ = r"""
import json, lmdb, struct, sys
env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=8)
db = env.open_db(sys.argv[2].encode(), create=False)
out = {}
with env.begin() as txn:
    for k, v in txn.cursor(db=db):
        magic, ver, dtype, ndim, _, c, h, w, label, index, nbytes = struct.unpack("<4sBBBBIIIiII", v[:32])
        px = struct.unpack("<%df" % (nbytes // 4), v[48:48 + nbytes])
        out[index] = [label, c, h, w, [round(x * 255) for x in px]]
print(json.dumps(out))
"""

REFERENCE = r"""
import json, sys
from PIL import Image
from torchvision.datasets import ImageFolder
root, resize, crop = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ds = ImageFolder(root)
def bilinear(img, w, h, dw, dh):  # half-pixel centres, edges clamped: as documented
    out = []
    fx, fy = w / dw, h / dh
    for y in range(dh):
        sy = max(0.0, (y + 0.5) * fy - 0.5); y0 = int(sy); y1 = min(y0 + 1, h - 1); wy = sy - y0
        for x in range(dw):
            sx = max(0.0, (x + 0.5) * fx - 0.5); x0 = int(sx); x1 = min(x0 + 1, w - 1); wx = sx - x0
            px = []
            for c in range(3):
                a, b = img[y0 * w + x0][c], img[y0 * w + x1][c]
                d, e = img[y1 * w + x0][c], img[y1 * w + x1][c]
                top = a + (b - a) * wx; bot = d + (e - d) * wx
                px.append(int(top + (bot - top) * wy + 0.5))
            out.append(tuple(px))
    return out
res = []
for path, label in ds.samples:
    im = Image.open(path).convert("RGB")
    w, h = im.size
    px = list(im.getdata())
    if resize and min(w, h) != resize:
        if w <= h: dw, dh = resize, h * resize // w
        else: dw, dh = w * resize // h, resize
        px = bilinear(px, w, h, dw, dh); w, h = dw, dh
    x0, y0 = (w - crop) // 2, (h - crop) // 2
    chw = [px[(y0 + y) * w + x0 + x][c] for c in range(3) for y in range(crop) for x in range(crop)]
    res.append([path, label, chw])
print(json.dumps({"classes": ds.classes, "samples": res}))
"""

CONFIG = """
run: {{name: {name}}}
dataset:
  source: image_folder
  path: {root}
  mean: [0]
  std: [1]
  image: {{train: train, test: val, resize: {resize}, crop: {crop}}}
cache: {{enabled: true, path: {cache}}}
loader: {{workers: 2, task_size: 4}}
prefetch: {{batch_size: 8}}
trainer: {{backend: "null", epochs: 1}}
"""


def py(script, *args):
    p = subprocess.run(["/usr/bin/python3", "-c", script] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    zp.check(p.returncode == 0, p.stderr[-2000:])
    return p.stdout


def compare(w, name, resize, crop, tolerance_jpeg, tolerance_png):
    root = os.path.join(w.path, "imgs")
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, root=root, resize=resize, crop=crop,
                                                cache=name + "-cache"))
    rc, out, err = w.run("up", cfg)
    zp.check(rc == 0, err[-2000:])
    got = json.loads(py(READ, os.path.join(w.path, name + "-cache"), "imgs/train"))
    ref = json.loads(py(REFERENCE, os.path.join(root, "train"), str(resize), str(crop)))
    zp.check(ref["classes"] == ["ant", "bee", "cat"], ref["classes"])
    zp.check(len(got) == len(ref["samples"]) == 45, "%d cached, %d listed" % (len(got), len(ref["samples"])))
    worst = {}
    for i, (path, label, chw) in enumerate(ref["samples"]):
        g = got[str(i)]
        zp.check(g[0] == label, "%s: label %d, torchvision's ImageFolder says %d" % (path, g[0], label))
        zp.check(g[1:4] == [3, crop, crop], g[1:4])
        diff = max(abs(a - b) for a, b in zip(g[4], chw))
        kind = os.path.basename(path)[0]
        worst[kind] = max(worst.get(kind, 0), diff)
        tol = tolerance_png if path.endswith(".png") else tolerance_jpeg
        zp.check(diff <= tol, "%s: a pixel differs by %d from the reference (tolerance %d)" % (path, diff, tol))
    return worst


def decoded_pixels_and_classes_match_pil_and_torchvision():
    with zp.Workdir() as w:
        py(MAKE, os.path.join(w.path, "imgs"))
        worst = compare(w, "plain", 0, 30, 1, 0)  # no resize: crop 30x30 out of 40x30
        print("  largest difference by kind (r rgb, g gray, c cmyk jpeg; p rgb, q palette png):", worst)
        worst = compare(w, "resized", 20, 18, 2, 1)  # 40x30 -> 26x20 -> 18x18
        print("  after resize:", worst)


def a_missing_folder_or_list_is_named():
    """Before any stage starts (it used to free an uninitialised pointer)."""
    with zp.Workdir() as w:
        missing = os.path.join(w.path, "nowhere")
        cfg = w.write("m.yaml", CONFIG.format(name="m", root=missing, resize=0, crop=8, cache="m-cache"))
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 2 and missing + "/train: No such file or directory" in err, (rc, err))
        # which keys made the path, and the layout expected there
        zp.check("dataset.path (%s) + dataset.image.train (train)" % missing in err and
                 "CLASS/*.jpg" in err, err)
        rc, out, err = w.run("up", cfg, "dataset.source=image_list", "dataset.image.train=t.txt")
        zp.check(rc == 2 and missing + "/t.txt: No such file or directory" in err, (rc, err))
        zp.check("a list file of" in err, err)


def bad_files_are_named_or_skipped():
    with zp.Workdir() as w:
        root = os.path.join(w.path, "imgs")
        py(MAKE, root)
        d = os.path.join(root, "train", "ant")
        good = open(os.path.join(d, "r0.jpg"), "rb").read()
        open(os.path.join(d, "t_truncated.jpg"), "wb").write(good[:len(good) // 2])
        open(os.path.join(d, "u_empty.jpg"), "wb").close()
        open(os.path.join(d, "v_text.png"), "w").write("hello, not a png")
        open(os.path.join(d, "w_junk.jpg"), "wb").write(good[:200] + bytes(range(256)) * 8)
        bad = {"t_truncated.jpg", "u_empty.jpg", "v_text.png", "w_junk.jpg"}
        cfg = w.write("b.yaml", CONFIG.format(name="stop", root=root, resize=0, crop=30, cache="b-cache"))
        rc, out, err = w.run("up", cfg, "cache.enabled=false")
        zp.check(rc == 1, "exit %d" % rc)
        logs = "".join(open(os.path.join(w.run_dir("stop"), "logs", f)).read()
                       for f in os.listdir(os.path.join(w.run_dir("stop"), "logs")))
        zp.check(any(os.path.join(d, b) in logs for b in bad), "no bad file named:\n" + logs[-2000:])
        zp.check("loader.on_error: skip leaves such samples out" in logs + err,
                 "the way out is not said:\n" + (logs + err)[-2000:])
        rc, out, err = w.run("up", cfg, "run.name=skip", "cache.enabled=false", "loader.on_error=skip")
        zp.check(rc == 0, err[-2000:])
        rep = json.load(open(os.path.join(w.run_dir("skip"), "report.json")))
        listed = {os.path.basename(s["error"].split(":")[0]) for s in rep["skipped_samples"]}
        zp.check(listed == bad, "skipped: %s" % [s["error"] for s in rep["skipped_samples"]])
        why = {os.path.basename(s["error"].split(":")[0]): s["error"] for s in rep["skipped_samples"]}
        zp.check("empty file" in why["u_empty.jpg"] and "truncated" in why["t_truncated.jpg"] and
                 "not a PNG" in why["v_text.png"], why)
        e = zp.epoch_ends(w.run_dir("skip"), "train")[0]
        zp.check(e["skipped"] == 4 and e["samples"] == 45, e)


if __name__ == "__main__":
    zp.main([decoded_pixels_and_classes_match_pil_and_torchvision, bad_files_are_named_or_skipped,
             a_missing_folder_or_list_is_named])
