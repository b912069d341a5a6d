"""Scientific arrays as a native source: dataset.source hdf5 (files written
by h5py: chunked and gzip-compressed, chunked plain and contiguous, several
files a split) and npy (folders of numpy.save files), with a float32 input,
an int64 target and a uint8 image target. A user's program reads them
through the Python package: every field bit for bit the array's row, every
sample exactly once, cache off, cold and warm, and after a cut mid-epoch
and load_state_dict(). Bad input is named before any stage starts, or at
read time naming the sample: a glob that matches nothing, a missing field,
fields of a file that differ in samples, types zeus-pipe does not read,
files that differ from one another, a corrupt or truncated file, an .npy
header we cannot read, Fortran order, an object array, and a chunk whose
compressed bytes were overwritten. `zeus-pipe dataset CONFIG` prints what
the probe found. Needs numpy, h5py and torch in /usr/bin/python3."""
import os
import zp
from test_python import PACKAGE, python_command

TRAIN = (130, 70, 100)  # rows of each train file
TEST = 64
FIELDS = {"x": "/inputs", "y": "/targets", "mask": "/masks/mask"}

CONFIG = """
run: {{name: {name}}}
seed: 3
dataset:
  source: {source}
  files: {{train: [{train}], test: [{test}]}}
  fields: {fields}
loader: {{workers: 2, task_size: 24, on_error: {on_error}}}
prefetch: {{batch_size: 40}}
cache: {{enabled: {cache}, path: {path}}}
trainer:
  epochs: 2
  command: [{python}, read.py, {mode}, {name}]
"""

# Checks every batch against the arrays (want.npz) and writes the indices it
# read, a line a batch, to NAME-seen.txt. Mode cut: saves the data position
# after batch 3 of epoch 1 and dies; resume: goes on from that save.
PROGRAM = """
import os, sys, numpy as np, torch, zeus_pipe
mode, name = sys.argv[1], sys.argv[2]
want = np.load("want.npz")
out = open(name + "-seen.txt", "a")
with zeus_pipe.attach() as zp:
    if mode == "resume":
        zp.load_state_dict(torch.load("cut-state.pt"))
    for epoch in range(zp.epoch, 2):
        for split, loop in (("train", zp.train), ("test", zp.test)):
            for i, b in enumerate(loop):
                idx = zp.indices.numpy()
                for k in ("x", "y", "mask"):
                    got, exp = b[k].cpu().numpy(), want[split + "_" + k][idx]
                    if got.dtype != exp.dtype or got.shape != exp.shape or got.tobytes() != exp.tobytes():
                        print("MISMATCH %s %s epoch %d batch %d: %s %s vs %s %s" % (
                            split, k, epoch, i, got.dtype, got.shape, exp.dtype, exp.shape))
                        sys.exit(5)
                print(split, epoch, ",".join(map(str, idx.tolist())), file=out, flush=True)
                if mode == "cut" and split == "train" and epoch == 1 and i == 2:
                    torch.save(zp.state_dict(), "cut-state.pt")
                    os._exit(3)
print("checked", file=out)
"""


def arrays():
    """Every split's fields, as the files hold them in order."""
    import numpy as np
    rng = np.random.default_rng(7)

    def rows(n):
        return {"x": rng.standard_normal((n, 4, 6), dtype=np.float32),
                "y": rng.integers(-2 ** 40, 2 ** 40, (n,), dtype=np.int64),
                "mask": rng.integers(0, 256, (n, 1, 8, 8), dtype=np.uint8)}
    return [rows(n) for n in TRAIN], [rows(TEST)]


def write_data(w):
    """The same rows as HDF5 files (h5/) and .npy folders (npy/), and want.npz."""
    import h5py
    import numpy as np
    train, test = arrays()
    os.makedirs(os.path.join(w.path, "h5"))
    kinds = ({"chunks": (7, 4, 6), "compression": "gzip"}, {}, {"chunks": (16, 4, 6)})
    for i, (part, kind) in enumerate(zip(train, kinds)):
        with h5py.File(os.path.join(w.path, "h5", "train_%d.h5" % i), "w") as f:
            f.create_dataset("inputs", data=part["x"], **kind)
            f.create_dataset("targets", data=part["y"])
            f.create_dataset("masks/mask", data=part["mask"],
                             **({"chunks": (5, 1, 8, 8), "compression": "gzip"} if kind else {}))
    with h5py.File(os.path.join(w.path, "h5", "test.h5"), "w") as f:
        for k, path in FIELDS.items():
            f.create_dataset(path.lstrip("/"), data=test[0][k])
    for name, part in [("train_%d" % i, p) for i, p in enumerate(train)] + [("test", test[0])]:
        os.makedirs(os.path.join(w.path, "npy", name))
        for k in FIELDS:
            np.save(os.path.join(w.path, "npy", name, k + ".npy"), part[k])
    np.savez(os.path.join(w.path, "want.npz"),
             **{"%s_%s" % (s, k): np.concatenate([p[k] for p in parts])
                for s, parts in (("train", train), ("test", test)) for k in FIELDS})


def config(w, name, source="hdf5", mode="all", cache="false", on_error="error", fields=None,
           train=None, test=None):
    h5 = source == "hdf5"
    fields = fields or ("{%s}" % ", ".join("%s: %s" % (k, v if h5 else k + ".npy")
                                          for k, v in FIELDS.items()))
    return w.write(name + ".yaml", CONFIG.format(
        name=name, source=source, fields=fields, on_error=on_error, cache=cache,
        path=os.path.join(w.path, "cache-" + source), python=python_command(), mode=mode,
        train=train or ("h5/train_*.h5" if h5 else "npy/train_*"),
        test=test or ("h5/test.h5" if h5 else "npy/test")))


def up(w, cfg):
    p = w.start("up", cfg, env=dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE)))
    out, err = p.communicate(timeout=240)
    return p.returncode, err


def seen(w, name, split, epoch):
    got = []
    with open(os.path.join(w.path, name + "-seen.txt")) as f:
        for line in f:
            part = line.split()
            if part[0] == split and int(part[1]) == epoch:
                got += [int(i) for i in part[2].split(",")]
    return got


def each_once(w, name, epochs=(0, 1)):
    n = {"train": sum(TRAIN), "test": TEST}
    for split in n:
        for e in epochs:
            got = seen(w, name, split, e)
            zp.check(sorted(got) == list(range(n[split])), "%s %s epoch %d: %d samples, %d distinct"
                     % (name, split, e, len(got), len(set(got))))
        ends = zp.epoch_ends(w.run_dir(name), split)
        zp.check([e["epoch"] for e in ends] == list(epochs) and
                 all(e["samples"] == e["distinct"] == n[split] and
                     e["index_checksum"] == zp.index_checksum(range(n[split])) for e in ends),
                 "%s %s: %s" % (name, split, ends))


def hdf5_and_npy_fields_come_back_bit_for_bit_once():
    with zp.Workdir() as w:
        write_data(w)
        w.write("read.py", PROGRAM)
        for source in ("hdf5", "npy"):
            for name, cache in ((source + "-off", "false"), (source + "-cold", "true"),
                                (source + "-warm", "true")):
                rc, err = up(w, config(w, name, source, cache=cache))
                zp.check(rc == 0, "%s: exit %d\n%s" % (name, rc, err[-3000:]))
                zp.check(zp.text(os.path.join(w.path, name + "-seen.txt")).endswith("checked\n"),
                         "%s: the program did not check every batch\n%s" % (name, err[-2000:]))
                each_once(w, name)
            for name, want in ((source + "-cold", [(0, sum(TRAIN)), (sum(TRAIN), 0)]),
                               (source + "-warm", [(sum(TRAIN), 0)] * 2)):
                got = [(m["hits"], m["misses"]) for m in zp.metrics(w.run_dir(name))
                       if m.get("event") == "cache" and m["split"] == "train"]
                zp.check(got == want, "%s: cache hits and misses a train epoch %s, want %s"
                         % (name, got, want))


def a_run_cut_mid_epoch_goes_on_exactly():
    with zp.Workdir() as w:
        write_data(w)
        w.write("read.py", PROGRAM)
        rc, err = up(w, config(w, "cut", mode="cut"))
        zp.check(rc != 0 and os.path.exists(os.path.join(w.path, "cut-state.pt")),
                 "the cut run: exit %d\n%s" % (rc, err[-2000:]))
        rc, err = up(w, config(w, "resume", mode="resume"))
        zp.check(rc == 0, "resume: exit %d\n%s" % (rc, err[-3000:]))
        both = seen(w, "cut", "train", 1) + seen(w, "resume", "train", 1)
        zp.check(len(seen(w, "cut", "train", 1)) == 3 * 40 and sorted(both) == list(range(sum(TRAIN))),
                 "train epoch 1 over both runs: %d samples, %d distinct" % (len(both), len(set(both))))
        ends = zp.epoch_ends(w.run_dir("resume"), "train")
        zp.check([e["epoch"] for e in ends] == [1] and ends[0]["samples"] == ends[0]["distinct"]
                 == sum(TRAIN), ends)


def a_changed_file_invalidates_the_cache():
    """The cache's fingerprint holds the files' paths, sizes, mtimes and
    samples: after one file's mtime changes the warm cache is refused,
    saying so, before any stage starts; cache.on_mismatch: rebuild rebuilds
    it (every train sample a miss again)."""
    with zp.Workdir() as w:
        write_data(w)
        w.write("read.py", PROGRAM)
        for source, path in (("hdf5", "h5/train_1.h5"), ("npy", "npy/train_1/y.npy")):
            rc, err = up(w, config(w, source + "-first", source, cache="true"))
            zp.check(rc == 0, err[-2000:])
            st = os.stat(os.path.join(w.path, path))
            os.utime(os.path.join(w.path, path), (st.st_atime, st.st_mtime + 60))
            rc, err = up(w, config(w, source + "-again", source, cache="true"))
            zp.check(rc == 2 and "was built from another dataset" in err and "xxh64" in err and
                     not os.path.exists(w.run_dir(source + "-again")), "%s: exit %d\n%s"
                     % (source, rc, err[-2000:]))
            name = source + "-rebuilt"
            p = w.start("up", config(w, name, source, cache="true"), "cache.on_mismatch=rebuild",
                        env=dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE)))
            out, err = p.communicate(timeout=240)
            zp.check(p.returncode == 0, err[-2000:])
            got = [(m["hits"], m["misses"]) for m in zp.metrics(w.run_dir(name))
                   if m.get("event") == "cache" and m["split"] == "train"]
            zp.check(got[:1] == [(0, sum(TRAIN))], "%s rebuilt: %s" % (source, got))
            each_once(w, name)


def dataset_prints_splits_files_and_fields():
    with zp.Workdir() as w:
        write_data(w)
        rc, out, err = w.run("dataset", config(w, "show"))
        zp.check(rc == 0, err)
        for want in ("source hdf5", "train  300 samples", "test   64 samples",
                     "130        %s/h5/train_0.h5" % w.path, "70         %s/h5/train_1.h5" % w.path,
                     "x                float32  [4, 6]           96 bytes",
                     "y                int64    []               8 bytes",
                     "mask             uint8    [1, 8, 8]        64 bytes",
                     "fields: 3, 168 bytes a sample"):
            zp.check(want in out, "%r not in:\n%s" % (want, out))
        rc, out, err = w.run("dataset", config(w, "shown", "npy"))
        zp.check(rc == 0 and "100        %s/npy/train_2" % w.path in out, out + err)
        # every type a field can be, as h5py and numpy write them
        import h5py
        import numpy as np
        types = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")
        with h5py.File(os.path.join(w.path, "types.h5"), "w") as f:
            for t in types:
                f.create_dataset(t, data=np.zeros((3, 2), t))
        os.makedirs(os.path.join(w.path, "types"))
        for t in types + ("bool",):
            np.save(os.path.join(w.path, "types", t + ".npy"), np.zeros((3, 2), t))
        for source, names in (("hdf5", types), ("npy", types + ("bool",))):
            fields = "{%s}" % ", ".join("f_%s: %s" % (t, "/" + t if source == "hdf5" else t + ".npy")
                                        for t in names)
            where = "types.h5" if source == "hdf5" else "types"
            rc, out, err = w.run("dataset", config(w, "types-" + source, source, fields=fields,
                                                   train=where, test=where))
            zp.check(rc == 0, err)
            for t in names:
                want = "f_%-14s %-8s [2]" % (t, "uint8" if t == "bool" else t)
                zp.check(want in out, "%s: %r not in\n%s" % (source, want, out))


def refused(w, why, **kw):
    """`zeus-pipe dataset` and `up` of the config both exit 2 saying `why`,
    and `up` starts no stage (no run folder)."""
    name = "bad%d" % len(os.listdir(w.path))
    cfg = config(w, name, **kw)
    rc, out, err = w.run("dataset", cfg)
    zp.check(rc == 2 and why in err, "dataset %s: exit %d, want %r:\n%s" % (kw, rc, why, err))
    rc, out, err = w.run("up", cfg)
    zp.check(rc == 2 and why in err and not os.path.exists(w.run_dir(name)),
             "up %s: exit %d, want %r:\n%s" % (kw, rc, why, err))


def bad_files_are_named_before_any_stage_starts():
    import h5py
    import numpy as np
    with zp.Workdir() as w:
        write_data(w)
        refused(w, "'%s/h5/nope_*.h5' matches no file" % w.path, train="h5/nope_*.h5")
        refused(w, "dataset /nope is not there", fields="{x: /inputs, y: /nope}")
        bad = os.path.join(w.path, "bad")
        os.makedirs(bad)

        def h5(name, **data):
            with h5py.File(os.path.join(bad, name), "w") as f:
                for k, v in data.items():
                    f.create_dataset(k, data=v)
            return "bad/" + name
        rows = np.zeros((10, 2), np.float32)
        refused(w, "field 'y' (/b) has 9 samples (axis 0) where 'x' (/a) has 10",
                train=h5("axis.h5", a=rows, b=np.zeros(9, np.int64)), fields="{x: /a, y: /b}")
        refused(w, "dataset /a is an unsigned integer wider than a byte",
                train=h5("u16.h5", a=np.zeros((4, 2), np.uint16)), fields="{x: /a}")
        refused(w, "dataset /a is big-endian", train=h5("be.h5", a=rows.astype(">f4")),
                fields="{x: /a}")
        refused(w, "dataset /a is a compound type",
                train=h5("rec.h5", a=np.zeros(4, [("p", "<f4"), ("q", "<i4")])), fields="{x: /a}")
        refused(w, "dataset /a is an enum (h5py writes bool so)",
                train=h5("bool.h5", a=np.zeros(4, bool)), fields="{x: /a}")
        with h5py.File(os.path.join(bad, "bf16.h5"), "w") as f:  # bfloat16: 2 bytes, not IEEE half
            t = h5py.h5t.IEEE_F16LE.copy()
            t.set_fields(15, 7, 8, 0, 7)
            t.set_ebias(127)
            h5py.h5d.create(f.id, b"a", t, h5py.h5s.create_simple((4, 2)))
        refused(w, "dataset /a is a number of a layout zeus-pipe does not read", train="bad/bf16.h5",
                fields="{x: /a}")
        other = h5("other.h5", a=np.zeros((10, 3), np.float32))
        refused(w, "is float32 [3], in %s/bad/axis.h5 it is float32 [2]: every file needs the same"
                % w.path, train="bad/axis.h5, " + other, fields="{x: /a}")
        with open(os.path.join(bad, "junk.h5"), "wb") as f:
            f.write(b"not an hdf5 file at all" * 40)
        refused(w, "%s/bad/junk.h5: cannot be opened as an HDF5 file (HDF5: " % w.path,
                train="bad/junk.h5", fields="{x: /a}")
        whole = open(os.path.join(w.path, "h5", "train_0.h5"), "rb").read()
        with open(os.path.join(bad, "cut.h5"), "wb") as f:
            f.write(whole[:len(whole) // 3])
        refused(w, "%s/bad/cut.h5:" % w.path, train="bad/cut.h5")
        # .npy: a header we cannot read, Fortran order, objects, truncated
        for name, why in (("head", "a header we cannot read"), ("fortran", "is in Fortran order"),
                          ("objects", "holds Python objects (dtype object)"), ("short", "truncated")):
            os.makedirs(os.path.join(bad, name))
            path = os.path.join(bad, name, "x.npy")
            if name == "fortran":
                np.save(path, np.asfortranarray(np.zeros((5, 3), np.float32)))
            elif name == "objects":
                np.save(path, np.array([{}, None], dtype=object), allow_pickle=True)
            else:
                np.save(path, np.zeros((50, 3), np.float32))
                data = open(path, "rb").read()
                data = data.replace(b"'descr'", b"'dtype'") if name == "head" else data[:-100]
                open(path, "wb").write(data)
            refused(w, why, source="npy", train="bad/" + name, fields="{x: x.npy}")


def a_corrupt_chunk_is_named_at_read_time_and_skipped():
    """Overwritten compressed bytes of one chunk (rows 14..20 of train_0.h5's
    /inputs): the probe reads no data and passes; the loaders name each
    sample of the chunk and, with loader.on_error: skip, the epoch goes on
    without them, counted as skipped."""
    import h5py
    with zp.Workdir() as w:
        write_data(w)
        w.write("read.py", PROGRAM.replace("sys.exit(5)", "pass"))
        path = os.path.join(w.path, "h5", "train_0.h5")
        with h5py.File(path, "r") as f:
            info = f["inputs"].id.get_chunk_info(2)  # rows 14..20
        with open(path, "r+b") as f:
            f.seek(info.byte_offset)
            f.write(b"\xff" * info.size)
        rc, err = up(w, config(w, "chunk", on_error="skip"))
        zp.check(rc == 0, "exit %d\n%s" % (rc, err[-3000:]))
        ends = zp.epoch_ends(w.run_dir("chunk"), "train")
        zp.check(all(e["skipped"] == 7 and e["samples"] == sum(TRAIN) - 7 for e in ends), ends)
        logs = "".join(zp.text(os.path.join(w.run_dir("chunk"), "logs", f))
                       for f in os.listdir(os.path.join(w.run_dir("chunk"), "logs")))
        zp.check("%s: dataset /inputs cannot be read (HDF5: " % path in logs and
                 "train sample 14 (row 14)" in logs, logs[-3000:])


if __name__ == "__main__":
    zp.main_needing(["numpy", "h5py", "torch"],
                    [dataset_prints_splits_files_and_fields,
                     bad_files_are_named_before_any_stage_starts,
                     hdf5_and_npy_fields_come_back_bit_for_bit_once,
                     a_changed_file_invalidates_the_cache,
                     a_run_cut_mid_epoch_goes_on_exactly,
                     a_corrupt_chunk_is_named_at_read_time_and_skipped])
