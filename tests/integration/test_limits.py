"""Sizes the wire refuses are refused before anything starts: an IDX file whose
forged header promises images of more pixels than a message carries
(ZP_MAX_ELEMS) is named at probe time, not loaded into SAMPLES that every
receiver would drop as malformed."""
import os
import struct
import zp

CONFIG = """
run: {name: forged}
dataset:
  source: idx
  path: data
  train_images: train-images
  train_labels: train-labels
  test_images: test-images
  test_labels: test-labels
trainer: {backend: cpu, epochs: 1}
"""


def idx(path, dims, data=b""):
    """An IDX file of unsigned bytes: magic 0x000008NN, big-endian dimensions."""
    with open(path, "wb") as f:
        f.write(bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data)


def forged_idx_header_is_refused_at_probe_naming_file_and_limit():
    with zp.Workdir() as w:
        data = os.path.join(w.path, "data")
        os.mkdir(data)
        # 2^30 x 2^30 pixels an image: the header alone, as a forged file would be
        idx(os.path.join(data, "train-images"), [2, 1 << 30, 1 << 30])
        idx(os.path.join(data, "train-labels"), [2], b"\0\1")
        idx(os.path.join(data, "test-images"), [1, 28, 28], b"\0" * 784)
        idx(os.path.join(data, "test-labels"), [1], b"\0")
        cfg = w.write("forged.yaml", CONFIG)
        # dataset.path "data", written in the file, is the file's folder's data/
        want = ("zeus-pipe: %s/train-images: images of 1073741824 x 1073741824 = "
                "1152921504606846976 pixels, more than a message carries (ZP_MAX_ELEMS = 16777216)" % data)
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 2, "exit %s, want 2:\n%s" % (rc, err))
        zp.check(want in err, "no '%s' in:\n%s" % (want, err))
        zp.check(not os.path.exists(w.run_dir("forged")), "up started the run:\n" + err)
        # one pixel over the limit is refused too
        idx(os.path.join(data, "train-images"), [2, 4096, 4097])
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 2 and "train-images: images of 4096 x 4097 = 16781312 pixels" in err, err)
        zp.check(not os.path.exists(w.run_dir("forged")), "up started the run:\n" + err)

if __name__ == "__main__":
    zp.main([forged_idx_header_is_refused_at_probe_naming_file_and_limit])
