"""Image files that lie or lean on the decoder: an abbreviated JPEG (no
Huffman tables of its own, MJPEG-style) decodes as it would alone even after
a file with tables of its own went through the same loader; a progressive
JPEG whose header claims 16000 x 16000 pixels (8 KB of file) and a JPEG of
tables only are bad samples that loader.on_error names, never decoded into
gigabytes or from uninitialised sizes."""
import json
import os
import subprocess

import zp

MAKE = r"""
import io, sys
import numpy as np
from PIL import Image
out = sys.argv[1]
rng = np.random.default_rng(0)
noise = Image.fromarray(rng.integers(0, 256, (48, 64, 3), dtype=np.uint8))
noise.save(out + "/a_optimized.jpg", quality=90, optimize=True)  # tables of its own, not the standard ones
y, x = np.mgrid[0:48, 0:64]
smooth = np.stack([x * 4, y * 5, (x + y) * 2], 2).astype(np.uint8)
buf = io.BytesIO()
Image.fromarray(smooth).save(buf, "JPEG", quality=90)  # libjpeg's standard Huffman tables
data, out_bytes, i = buf.getvalue(), bytearray(b"\xff\xd8"), 2
while data[i + 1] != 0xDA:  # every segment before the scan but the tables
    n = data[i + 2] << 8 | data[i + 3]
    if data[i + 1] != 0xC4:
        out_bytes += data[i:i + 2 + n]
    i += 2 + n
out_bytes += data[i:]
open(out + "/b_abbreviated.jpg", "wb").write(bytes(out_bytes))
buf = io.BytesIO()
Image.fromarray(smooth).save(buf, "JPEG", quality=90, progressive=True)
bomb = bytearray(buf.getvalue())
at = bomb.index(b"\xff\xc2")  # SOF2: length, precision, height, width
bomb[at + 5:at + 9] = (16000).to_bytes(2, "big") + (16000).to_bytes(2, "big")
open(out + "/c_bomb.jpg", "wb").write(bytes(bomb))
tables, i = bytearray(b"\xff\xd8"), 2
while data[i + 1] not in (0xC0, 0xDA):  # up to the frame: quantisation and Huffman tables
    n = data[i + 2] << 8 | data[i + 3]
    tables += data[i:i + 2 + n]
    i += 2 + n
open(out + "/d_tables_only.jpg", "wb").write(bytes(tables + b"\xff\xd9"))
"""

READ = r"""
import json, lmdb, struct, sys
env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=8)
with env.begin() as t:
    name = [k for k, _ in t.cursor() if k.endswith(b"/train")][0]
db = env.open_db(name, create=False)
out = {}
with env.begin() as t:
    for k, v in t.cursor(db=db):
        index, nbytes = struct.unpack("<II", v[24:32])
        out[index] = list(v[48:48 + nbytes])
print(json.dumps(out))
"""

CONFIG = """
run: {{name: {name}}}
dataset:
  source: image_list
  path: {root}
  dtype: uint8
  image: {{train: {lst}, test: {lst}, resize: 0, crop: 40}}
cache: {{enabled: true, path: {name}-cache}}
loader: {{workers: 1, task_size: 8, on_error: {on_error}}}
prefetch: {{batch_size: 8, shuffle: false}}
trainer: {{backend: "null", epochs: 1}}
"""


def py(script, *args):
    p = subprocess.run(["/usr/bin/python3", "-c", script] + list(args), capture_output=True,
                       text=True, timeout=300)
    zp.check(p.returncode == 0, p.stderr[-2000:])
    return p.stdout


def run(w, name, files, on_error="skip", *over):
    imgs = os.path.join(w.path, "imgs")
    lst = w.write(name + ".txt", "".join("%s %d\n" % (os.path.join(imgs, f), i % 2)
                                         for i, f in enumerate(files)))
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, root=os.path.join(w.path, "imgs"),
                                                lst=lst, on_error=on_error))
    return w.run("up", cfg, *over)


def an_abbreviated_jpeg_decodes_as_alone_and_bombs_are_refused_by_their_header():
    try:
        py("import numpy, PIL, lmdb")
    except AssertionError:
        print("(no numpy, PIL or lmdb in /usr/bin/python3: skipped)")
        return
    with zp.Workdir() as w:
        os.makedirs(os.path.join(w.path, "imgs"))
        py(MAKE, os.path.join(w.path, "imgs"))
        # the abbreviated file right after one with tables of its own, in one loader's task
        rc, out, err = run(w, "both", ["a_optimized.jpg", "b_abbreviated.jpg"])
        zp.check(rc == 0, err[-2000:])
        rc, out, err = run(w, "alone", ["b_abbreviated.jpg"])
        zp.check(rc == 0, err[-2000:])
        both = json.loads(py(READ, os.path.join(w.path, "both-cache")))
        alone = json.loads(py(READ, os.path.join(w.path, "alone-cache")))
        zp.check("1" in both and "0" in alone, "the abbreviated JPEG was not decoded: %s"
                 % zp.text(os.path.join(w.run_dir("both"), "logs", "loader-0.log"))[-1500:])
        zp.check(len(both["1"]) == 3 * 40 * 40 and both["1"] == alone["0"],
                 "the abbreviated JPEG decoded after another differs from its decode alone by up "
                 "to %d" % max(abs(a - b) for a, b in zip(both["1"], alone["0"])))
        # the bomb and the tables: skipped, each with its reason, and nothing else lost
        rc, out, err = run(w, "bad", ["a_optimized.jpg", "c_bomb.jpg", "d_tables_only.jpg",
                                      "b_abbreviated.jpg"])
        zp.check(rc == 0, err[-2000:])
        rep = json.load(open(os.path.join(w.run_dir("bad"), "report.json")))
        why = {os.path.basename(s["error"].split(":")[0]): s["error"] for s in rep["skipped_samples"]}
        zp.check(set(why) == {"c_bomb.jpg", "d_tables_only.jpg"}, "skipped: %r" % why)
        zp.check("16000 x 16000 pixels, more than dataset.image.max_pixels (100000000)" in
                 why["c_bomb.jpg"], why["c_bomb.jpg"])
        zp.check("no image in it" in why["d_tables_only.jpg"], why["d_tables_only.jpg"])
        e = zp.epoch_ends(w.run_dir("bad"), "train")[0]
        zp.check(e["skipped"] == 2 and e["samples"] == 2, e)
        # the same with the crop at assembly and the cache keeping whole images: the path that
        # read the tables-only file's uninitialised size and stopped the run
        rc, out, err = run(w, "crop", ["a_optimized.jpg", "c_bomb.jpg", "d_tables_only.jpg",
                                       "b_abbreviated.jpg"], "skip", "dataset.augment.resized_crop=true")
        zp.check(rc == 0, err[-2000:])
        rep = json.load(open(os.path.join(w.run_dir("crop"), "report.json")))
        zp.check({os.path.basename(s["error"].split(":")[0]) for s in rep["skipped_samples"]}
                 == {"c_bomb.jpg", "d_tables_only.jpg"}, rep["skipped_samples"])
        e = zp.epoch_ends(w.run_dir("crop"), "train")[0]
        zp.check(e["skipped"] == 2 and e["samples"] == 2, e)
        # on_error: error stops the run on the bomb, naming it
        rc, out, err = run(w, "stop", ["c_bomb.jpg"], on_error="error")
        logs = "".join(zp.text(os.path.join(w.run_dir("stop"), "logs", f))
                       for f in os.listdir(os.path.join(w.run_dir("stop"), "logs")))
        zp.check(rc != 0 and "c_bomb.jpg: 16000 x 16000 pixels" in logs + err, (logs + err)[-2000:])


if __name__ == "__main__":
    zp.main([an_abbreviated_jpeg_decodes_as_alone_and_bombs_are_refused_by_their_header])
