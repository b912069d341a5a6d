"""Random augmentation (dataset.augment.*): the pixels the model is given
(their digest in batches.log) are the same for the same seed and epoch —
whether the trainer augments after the cache or loaders augment with the
cache off — differ from epoch to epoch, and differ from the samples as loaded."""
import json
import os
import zp

CONFIG = """
run: {{name: {name}}}
seed: 5
dataset:
  source: synthetic
  synthetic: {{train_samples: 640, test_samples: 128, shape: [3, 12, 16], classes: 4}}
  mean: [0.5, 0.4, 0.3]
  std: [0.2, 0.25, 0.3]
  augment: {{crop_padding: 2, resized_crop: true, scale: [0.3, 1], hflip: true, where: {where}}}
cache: {{enabled: {cache}, path: cache-{name}}}
loader: {{workers: 2, task_size: 16}}
prefetch: {{batch_size: 64, shuffle: false}}
trainer:
  backend: cpu
  model: {{hidden: [16]}}
  epochs: 3
  debug: {{log_batches: true}}
"""


def pixel_digests(run_dir):
    """{(epoch, batch index): digest of the batch's pixels} and the index digests."""
    px, idx = {}, {}
    for line in open(os.path.join(run_dir, "batches.log")):
        epoch, index, step, order, pixels = line.split()
        px[int(epoch), int(index)] = pixels
        idx[int(epoch), int(index)] = order
    return px, idx


def regions(run_dir, stage, region):
    report = json.load(open(os.path.join(run_dir, "report.json")))
    return sum(r["count"] for r in report["regions"] if r["stage"] == stage and r["region"] == region)


def run(w, name, where="trainer", cache="false", *extra):
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, where=where, cache=cache))
    rc, out, err = w.run("up", cfg, *extra)
    zp.check(rc == 0, err)
    return w.run_dir(name)


def same_seed_same_pixels_other_epoch_other_pixels():
    with zp.Workdir() as w:
        a = run(w, "a")
        b = run(w, "b")
        pa, ia = pixel_digests(a)
        pb, _ = pixel_digests(b)
        zp.check(len(pa) == 3 * 10, "%d batches logged" % len(pa))
        zp.check(pa == pb, "two runs with the same seed were augmented differently")
        # no shuffle: every epoch has the same batches of the same samples ...
        zp.check(all(ia[0, i] == ia[e, i] for e in range(3) for i in range(10)), "batches differ")
        # ... augmented differently in each
        for e in (1, 2):
            same = sum(pa[0, i] == pa[e, i] for i in range(10))
            zp.check(same == 0, "epoch %d: %d of 10 batches have epoch 1's pixels" % (e + 1, same))
        zp.check(regions(a, "trainer", "augment") == 30, "augment region count")
        # without augmentation every epoch sees the pixels as loaded
        plain = run(w, "plain", "trainer", "false", "dataset.augment.crop_padding=0",
                    "dataset.augment.resized_crop=false", "dataset.augment.hflip=false")
        pp, _ = pixel_digests(plain)
        zp.check(all(pp[0, i] == pp[e, i] for e in range(3) for i in range(10)), "plain epochs differ")
        zp.check(all(pp[e, i] != pa[e, i] for e in range(3) for i in range(10)), "not augmented")
        zp.check(regions(plain, "trainer", "augment") == 0, "plain run augmented")
        # another seed, other draws (and other samples: the digests all differ)
        c = run(w, "c", "trainer", "false", "seed=6")
        pc, _ = pixel_digests(c)
        zp.check(all(pc[k] != pa[k] for k in pa), "seed 6 gave seed 5's pixels")


def the_same_draws_in_loaders_and_after_the_cache():
    with zp.Workdir() as w:
        trainer = pixel_digests(run(w, "t"))[0]
        loader_dir = run(w, "l", "loader", "false")
        zp.check(pixel_digests(loader_dir)[0] == trainer,
                 "loaders augmented otherwise than the trainer")
        zp.check(regions(loader_dir, "trainer", "augment") == 0, "augmented twice")
        zp.check(regions(loader_dir, "loader", "augment") > 0, "no augment region in loaders")
        # with the cache on, epochs 2 and 3 read cached samples: augmented as fresh ones
        cached = run(w, "k", "trainer", "true")
        zp.check(pixel_digests(cached)[0] == trainer, "cached samples augmented otherwise")
        cfg = w.write("bad.yaml", CONFIG.format(name="bad", where="loader", cache="true"))
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 2 and "dataset.augment.where: loader needs cache.enabled: false" in err, err)


def stage_bytes(run_dir, stage):
    """The bytes a stage took in, from its final stats record."""
    for line in open(os.path.join(run_dir, "stats.jsonl")):
        r = json.loads(line)
        if r["stage"] == stage and r.get("final"):
            return r["total_bytes"]
    zp.check(False, "no final stats record of " + stage)


def uint8_samples_give_the_model_the_float32_pixels():
    """dataset.dtype: uint8 relays and caches raw pixels and the trainer
    normalises them: the model gets bit for bit what float32 samples give it."""
    with zp.Workdir() as w:
        f32 = run(w, "f", "trainer", "true")
        for cache in ("false", "true"):
            u8 = run(w, "u" + cache, "trainer", cache, "dataset.dtype=uint8")
            zp.check(pixel_digests(u8) == pixel_digests(f32),
                     "cache %s: the trainer normalised uint8 samples otherwise" % cache)
            la = [(m["split"], m["loss"]) for m in zp.epoch_ends(f32, "train") + zp.epoch_ends(f32, "test")]
            lb = [(m["split"], m["loss"]) for m in zp.epoch_ends(u8, "train") + zp.epoch_ends(u8, "test")]
            zp.check(la == lb, "losses differ: %r vs %r" % (la, lb))
            zp.check(regions(u8, "trainer", "transform") == 3 * (10 + 2), "trainer transform count")
            zp.check(regions(u8, "loader", "transform") == 0, "loaders normalised uint8 samples")
            # a quarter of the bytes cross the ring
            zp.check(4 * stage_bytes(u8, "trainer") == stage_bytes(f32, "trainer"),
                     "trainer bytes %d vs %d" % (stage_bytes(u8, "trainer"), stage_bytes(f32, "trainer")))
        # a cache of float32 samples is not read as uint8: the fingerprint names the change
        rc, out, err = w.run("up", w.write("again.yaml", CONFIG.format(name="again", where="trainer",
                                                                         cache="true")),
                             "cache.path=cache-f", "dataset.dtype=uint8")
        zp.check(rc == 2 and 'was "value schema: 4 (float32, XXH3-64 of header and payload)", now "value schema: 4 (uint8'
                 in err, err)
        cfg = w.write("bad.yaml", CONFIG.format(name="bad", where="loader", cache="false"))
        rc, out, err = w.run("up", cfg, "dataset.dtype=uint8")
        zp.check(rc == 2 and "loader needs dataset.dtype: float32" in err, err)


if __name__ == "__main__":
    zp.main([same_seed_same_pixels_other_epoch_other_pixels,
             the_same_draws_in_loaders_and_after_the_cache,
             uint8_samples_give_the_model_the_float32_pixels])
