"""The Python package zeus_pipe (python/) as trainer.command: a PyTorch
consumer gets, for the same seed, the batches the built-in trainer gets (the
same indices in the same order, the same pixels: its batches.log), every
epoch of both splits exactly once, len() right, x float32 or uint8 N,C,H,W by
dataset.dtype and y int64; a consumer that raises fails the run naming
trainer[0] and the Python error. Exits 77 (skipped) where /usr/bin/python3
has no torch."""
import os
import subprocess
import sys
import zp

PYTHON = sys.executable


def python_command():
    """The interpreter as the first items of a trainer.command: under `env`
    with zp.sanitizer_env() for a sanitizer build."""
    env = zp.sanitizer_env()
    if not env:
        return PYTHON
    return "env, %s, %s" % (", ".join("%s=%s" % kv for kv in sorted(env.items())), PYTHON)


PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")

CONFIG = """
run: {{name: {name}}}
seed: 5
dataset:
  source: synthetic
  dtype: {dtype}
  synthetic: {{train_samples: 1000, test_samples: 300, shape: [2, 6, 5], classes: 4}}
loader: {{workers: 2, task_size: 32}}
prefetch: {{batch_size: 64, depth: 2, shuffle: true}}
trainer:
  epochs: 2
  debug: {{log_batches: true}}
{trainer}
"""

# The consumer: every batch's split, epoch, position, shape, dtypes, pixel
# digest and indices, one line each, into the file named by its argument.
CONSUMER = """
import ctypes, sys, zeus_pipe
xx = ctypes.CDLL("libxxhash.so.0")
xx.XXH3_64bits.restype, xx.XXH3_64bits.argtypes = ctypes.c_uint64, [ctypes.c_void_p, ctypes.c_size_t]
out = open(sys.argv[1], "w")
with zeus_pipe.attach() as zp:
    print("len", len(zp.train), len(zp.test), file=out)
    for epoch in range(2):
        for name, src in (("train", zp.train), ("test", zp.test)):
            for i, (x, y) in enumerate(src):
                px = xx.XXH3_64bits(x.data_ptr(), x.numel() * x.element_size())
                print(name, epoch, i, tuple(x.shape), x.dtype, y.dtype, len(y), "%016x" % px,
                      ",".join(map(str, zp.indices.tolist())), file=out)
            if name == "train":
                zp.log("train_epoch", epoch=epoch, batches=i + 1)
"""

RAISES = """
import zeus_pipe
with zeus_pipe.attach() as zp:
    for x, y in zp.train:
        raise ValueError("the model wants 3 channels, got %d" % x.shape[1])
"""


def order_digest(indices):
    d = 0xcbf29ce484222325
    for i in indices:
        d = ((d ^ zp.mix64(i)) * 0x100000001b3) & zp.MASK
    return "%016x" % d


def up(w, name, dtype, trainer, overrides=()):
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, dtype=dtype, trainer=trainer))
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE))
    p = w.start("up", cfg, *overrides, env=env)
    out, err = p.communicate(timeout=240)
    return p.returncode, err


def builtin_batches(w, name, dtype, overrides=()):
    """{(epoch, index): (order digest, pixel digest)} of the built-in trainer."""
    rc, err = up(w, name, dtype, "  backend: cpu", overrides)
    zp.check(rc == 0, "built-in run: exit %d:\n%s" % (rc, err[-2000:]))
    with open(os.path.join(w.run_dir(name), "batches.log")) as f:
        return {(int(e), int(i)): (order, px) for e, i, _, order, px in map(str.split, f)}


def consumer_batches(w, name, dtype, raw=False, overrides=()):
    """The consumer's lines, by (split, epoch, index)."""
    w.write("consumer.py", CONSUMER.replace("zeus_pipe.attach()", "zeus_pipe.attach(raw=%r)" % raw))
    rc, err = up(w, name, dtype, "  command: [%s, consumer.py, %s.out]" % (python_command(), name),
                 overrides)
    zp.check(rc == 0, "the consumer: exit %d:\n%s" % (rc, err[-2000:]))
    with open(os.path.join(w.path, name + ".out")) as f:
        lines = [l.split() for l in f]
    zp.check(lines[0] == ["len", "16", "5"], "len(): %s, want 16 and 5" % lines[0])
    got = {}
    for split, epoch, i, *shape, xd, yd, n, px, idx in lines[1:]:
        got[split, int(epoch), int(i)] = (" ".join(shape), xd, yd, int(n), px,
                                          [int(v) for v in idx.split(",")])
    return got


def the_consumer_gets_the_built_in_trainers_batches(dtype, xdtype, pixels, raw=False,
                                                   overrides=()):
    with zp.Workdir() as w:
        want = builtin_batches(w, "builtin", dtype, overrides)
        got = consumer_batches(w, "mine", dtype, raw, overrides)
        zp.check(len(want) == 2 * 16, "the built-in trainer logged %d batches" % len(want))
        zp.check(len(got) == 2 * (16 + 5), "the consumer got %d batches" % len(got))
        for split, samples in (("train", 1000), ("test", 300)):
            for epoch in range(2):
                seen = [i for (s, e, _), v in sorted(got.items()) if s == split and e == epoch
                        for i in v[5]]
                zp.check(sorted(seen) == list(range(samples)),
                         "%s epoch %d: %d samples, %d distinct" % (split, epoch, len(seen), len(set(seen))))
        for (split, epoch, i), (shape, xd, yd, n, px, idx) in got.items():
            zp.check(shape == "(%d, 2, 6, 5)" % n and xd == xdtype and yd == "torch.int64",
                     "%s batch %d,%d: x %s %s, y %s" % (split, epoch, i, shape, xd, yd))
            if split == "train":
                order, bpx = want[epoch, i]
                zp.check(order_digest(idx) == order, "train batch %d,%d: other indices" % (epoch, i))
                zp.check(not pixels or px == bpx, "train batch %d,%d: other pixels" % (epoch, i))
        records = [m for m in zp.metrics(w.run_dir("mine")) if m.get("event") == "train_epoch"]
        zp.check([(m["epoch"], m["batches"]) for m in records] == [(0, 16), (1, 16)],
                 "log(): %s" % records)


def a_float32_consumer_gets_the_built_in_trainers_indices_and_pixels():
    the_consumer_gets_the_built_in_trainers_batches("float32", "torch.float32", True)


def a_uint8_consumer_gets_the_built_in_trainers_normalised_pixels():
    # uint8 samples come normalised to float32 on the CPU too, with the built-in
    # trainer's own table: the very bits its batches.log digests
    the_consumer_gets_the_built_in_trainers_batches("uint8", "torch.float32", True)


AUGMENT = ("dataset.augment.resized_crop=true", "dataset.augment.hflip=true",
           "dataset.augment.crop_padding=1")


def the_configs_augmentation_reaches_the_consumer_as_the_built_in_trainer_draws_it():
    # it used to be accepted and ignored: the same pixels every epoch
    the_consumer_gets_the_built_in_trainers_batches("uint8", "torch.float32", True,
                                                    overrides=AUGMENT)


def augmentation_with_raw_pixels_is_refused_at_attach_not_ignored():
    with zp.Workdir() as w:
        w.write("raw.py", "import sys, zeus_pipe\ntry:\n    zeus_pipe.attach(raw=True)\n"
                "except zeus_pipe.ZeusPipeError as e:\n    print(e, file=sys.stderr)\n    sys.exit(3)\n")
        rc, err = up(w, "raw", "uint8", "  command: [%s, raw.py]" % python_command(), AUGMENT)
        zp.check(rc != 0 and "dataset.augment" in err and "raw=True" in err,
                 "exit %d:\n%s" % (rc, err[-2000:]))


def a_raw_uint8_consumer_gets_uint8_batches_of_the_same_indices():
    # attach(raw=True): the pixels as they are (only the indices compare)
    the_consumer_gets_the_built_in_trainers_batches("uint8", "torch.uint8", False, raw=True)


def a_consumer_that_raises_fails_the_run_naming_trainer_0_and_the_error():
    with zp.Workdir() as w:
        w.write("raises.py", RAISES)
        rc, err = up(w, "raises", "float32", "  command: [%s, raises.py]" % python_command())
        zp.check(rc == 1, "exit %d, want 1:\n%s" % (rc, err[-2000:]))
        zp.check("trainer[0]" in err and "ValueError: the model wants 3 channels, got 2" in err,
                 err[-2000:])


PAST = """
import sys, zeus_pipe
zp = zeus_pipe.attach()
got = []
for epoch in range(3):
    got.append((zp.epoch, sum(1 for x, y in zp.train)))
print("got", got, "cap", zp.epochs, file=sys.stderr)
"""


def a_loop_decides_its_epochs_and_trainer_epochs_caps_them_without_a_crash():
    # the order of the splits is the loop's (tests/integration/test_seek.py); a
    # range(3) loop over a run of trainer.epochs 2 used to crash with "the run
    # has ended": its third epoch is now empty, and said; with 0 there is no cap
    with zp.Workdir() as w:
        w.write("past.py", PAST)
        rc, err = up(w, "past", "float32", "  command: [%s, past.py]" % python_command())
        zp.check(rc == 0 and "got [(0, 16), (1, 16), (2, 0)] cap 2" in err and
                 "train epoch 2 has no batches: the run gives epochs 0..1" in err,
                 "exit %d:\n%s" % (rc, err[-2000:]))
        rc, err = up(w, "nocap", "float32", "  command: [%s, past.py]" % python_command(),
                     ("trainer.epochs=0",))
        zp.check(rc == 0 and "got [(0, 16), (1, 16), (2, 16)] cap None" in err,
                 "trainer.epochs=0: exit %d:\n%s" % (rc, err[-2000:]))
        zp.check(len(zp.epoch_ends(w.run_dir("nocap"), "train")) == 3, "no cap: not 3 train epochs")


if __name__ == "__main__":
    if subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode:
        print("SKIP: %s has no torch (Debian: apt install python3-torch)" % PYTHON)
        sys.exit(77)
    zp.main([a_float32_consumer_gets_the_built_in_trainers_indices_and_pixels,
             a_uint8_consumer_gets_the_built_in_trainers_normalised_pixels,
             a_raw_uint8_consumer_gets_uint8_batches_of_the_same_indices,
             the_configs_augmentation_reaches_the_consumer_as_the_built_in_trainer_draws_it,
             augmentation_with_raw_pixels_is_refused_at_attach_not_ignored,
             a_consumer_that_raises_fails_the_run_naming_trainer_0_and_the_error,
             a_loop_decides_its_epochs_and_trainer_epochs_caps_them_without_a_crash])
