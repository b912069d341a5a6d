"""The LMDB cache on real processes: epoch 1 misses and epoch 2 hits, with the
same batches as an uncached run; warm killed with SIGKILL resumes without
reloading what it committed; a fingerprint mismatch is refused or rebuilt; a
full map leaves the run uncached with one warning; a corrupted value is caught
by verify and by the reader; and the environment is plain LMDB that
python3-lmdb and mdb_stat read."""
import glob
import gzip
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import time
import zp

LONG = """
run: {{name: {name}}}
seed: 5
dataset:
  source: synthetic
  synthetic: {{train_samples: {train}, test_samples: {test}, shape: {shape}, classes: 4, cost_us: {cost}}}
cache: {{enabled: true, path: {cache}, commit_every: 500, max_bytes: {max_bytes}}}
loader: {{workers: 2, task_size: 50}}
prefetch: {{batch_size: 100, depth: 2}}
trainer: {{backend: cpu, model: {{hidden: [16]}}, epochs: {epochs}}}
"""


def config(w, name, train=3000, test=500, shape="[1, 8, 8]", cost=0, epochs=3, max_bytes="1GiB",
           cache="cache"):
    return w.write(name + ".yaml", LONG.format(name=name, train=train, test=test, shape=shape,
                                               cost=cost, epochs=epochs, max_bytes=max_bytes,
                                               cache=os.path.join(w.path, cache)))


def cache_events(run_dir, split):
    return [m for m in zp.metrics(run_dir) if m.get("event") == "cache" and m["split"] == split]


def cache_stat(w, path):
    rc, out, err = w.run("cache", "stat", path, "--json")
    zp.check(rc == 0, "cache stat: %s" % err)
    return {d["name"]: d for d in json.loads(out)["databases"]}


def up(w, *args):
    rc, out, err = w.run("up", *args)
    zp.check(rc == 0, "up exit %d\n%s\n%s" % (rc, out, err))
    return out, err


def epoch_1_misses_epoch_2_hits_and_batches_equal_an_uncached_run():
    with zp.Workdir() as w:
        up(w, config(w, "cached"))
        up(w, config(w, "plain"), "cache.enabled=false")
        cached, plain = w.run_dir("cached"), w.run_dir("plain")
        for split, n in (("train", 3000), ("test", 500)):
            ev = cache_events(cached, split)
            zp.check([(e["hits"], e["misses"]) for e in ev] == [(0, n), (n, 0), (n, 0)],
                     "%s hits/misses per epoch: %s" % (split, [(e["hits"], e["misses"]) for e in ev]))
            for a, b in zip(zp.epoch_ends(cached, split), zp.epoch_ends(plain, split)):
                for key in ("samples", "distinct", "index_checksum", "order_digest", "loss"):
                    zp.check(a[key] == b[key], "%s epoch %d %s: %r cached, %r uncached" %
                             (split, a["epoch"], key, a[key], b[key]))
                zp.check(a["distinct"] == n, "coverage %d of %d" % (a["distinct"], n))
        zp.check(not cache_events(plain, "train"), "an uncached run reports no cache use")
        # the prefetch's readers copied the hits: their busy share is in its stats records
        shares = [r["readers_busy"] for r in map(json.loads, open(os.path.join(cached, "stats.jsonl")))
                  if r.get("stage") == "prefetch"]
        zp.check(shares and all(0 <= x <= 1.05 for x in shares) and max(shares) > 0,
                 "the prefetch's readers_busy: %s" % shares)


def hits_read_by_several_threads_are_the_batches_one_thread_reads():
    """prefetch.readers: 4 with 48 KiB samples (a 4.7 MiB batch, split four
    ways) reads every train batch of a warm epoch into the ring with the
    pixels that one reader gives, all of them hits."""
    with zp.Workdir() as w:
        runs = {}
        for readers in (1, 4):
            name = "readers%d" % readers
            up(w, config(w, name, train=600, test=100, shape="[3, 64, 64]", epochs=2),
               "prefetch.readers=%d" % readers, "trainer.backend=null",
               "trainer.debug.log_batches=true")
            ev = cache_events(w.run_dir(name), "train")
            zp.check([e["hits"] for e in ev] == [0 if readers == 1 else 600, 600],
                     "%d readers: train hits per epoch %s" % (readers, [e["hits"] for e in ev]))
            runs[readers] = open(os.path.join(w.run_dir(name), "batches.log")).read().splitlines()
        zp.check(len(runs[1]) == 12 and runs[1] == runs[4],
                 "batches (epoch, batch, step, order digest, pixel hash), 1 reader then 4:\n%s\n%s"
                 % ("\n".join(runs[1]), "\n".join(runs[4])))


def loader_work(run_dir):
    total = 0
    for log in glob.glob(os.path.join(run_dir, "logs", "loader-*.log")):
        m = re.search(r"loaded (\d+) samples", open(log).read())
        zp.check(m, "no loader total in " + log)
        total += int(m.group(1))
    return total


def warm_killed_midway_resumes_without_reloading_finished_keys():
    with zp.Workdir() as w:
        cfg = config(w, "w", train=20000, test=0, cost=100)
        p = w.start("warm", cfg)
        store = os.path.join(w.path, "cache")

        def some_committed():
            if not os.path.exists(os.path.join(store, "data.mdb")):
                return 0
            return cache_stat(w, store).get("synthetic/train", {}).get("entries", 0) >= 2000
        zp.wait_for(some_committed, 30, "warm to commit samples")
        p.kill()  # SIGKILL: no chance to commit what is pending
        p.wait()
        zp.wait_for(lambda: not zp.stage_pids(w.path), 5, "the stages to die with warm")
        done = cache_stat(w, store)["synthetic/train"]["entries"]
        zp.check(0 < done < 20000, "%d samples committed before the kill" % done)
        rc, out, err = w.run("warm", cfg)
        zp.check(rc == 0, "second warm: exit %d\n%s" % (rc, err))
        zp.check("synthetic/train: %d of 20000 samples cached; loading %d" % (done, 20000 - done) in err, err)
        zp.check("loaded %d samples; " % (20000 - done) in out and "holds 20000 of 20000" in out, out)
        runs = sorted(glob.glob(os.path.join(w.path, "runs", "w-warm*")), key=os.path.getmtime)
        work = loader_work(runs[-1])
        zp.check(work == 20000 - done, "the loaders loaded %d samples, want %d" % (work, 20000 - done))
        rc, out, err = w.run("cache", "verify", store)
        zp.check(rc == 0 and "20000 values checked, 0 bad" in out, out + err)


def a_fingerprint_mismatch_is_refused_and_rebuild_rebuilds():
    with zp.Workdir() as w:
        cfg = config(w, "fp", train=500, test=0, epochs=1)
        rc, out, err = w.run("warm", cfg)
        zp.check(rc == 0, err)
        rc, out, err = w.run("up", cfg, "dataset.mean=[0.5]")
        zp.check(rc == 2, "exit %d, want 2" % rc)
        zp.check("synthetic/train was built from another dataset or transform" in err, err)
        zp.check("mean=[0.5]" in err and "cache.on_mismatch=rebuild" in err, err)
        zp.check(not zp.stage_pids(w.path), "a stage was started")
        out, err = up(w, cfg, "dataset.mean=[0.5]", "cache.on_mismatch=rebuild")
        zp.check("rebuilding synthetic/train" in err, err)
        db = cache_stat(w, os.path.join(w.path, "cache"))["synthetic/train"]
        zp.check("mean=[0.5]" in db["fingerprint"] and db["entries"] == 500, str(db))
        ev = cache_events(w.run_dir("fp"), "train")  # the refused run made no run directory
        zp.check(ev[0]["hits"] == 0 and ev[0]["misses"] == 500, "the rebuilt cache starts empty: %s" % ev)


def a_full_map_stops_caching_with_one_warning_and_the_run_completes():
    with zp.Workdir() as w:
        cfg = config(w, "tiny", train=600, test=0, shape="[3, 64, 64]", epochs=2, max_bytes="4MiB")
        out, err = up(w, cfg)
        zp.check(out.count("warning: cache[0]:") == 1 and "cache full" in out, out)
        for e in zp.epoch_ends(w.run_dir("tiny"), "train"):
            zp.check(e["samples"] == 600 and e["distinct"] == 600 and
                     e["index_checksum"] == zp.index_checksum(range(600)), "coverage: %s" % e)
        ev = cache_events(w.run_dir("tiny"), "train")
        zp.check(0 < ev[1]["hits"] < 600, "the second epoch hits what fitted: %s" % ev)


FLIP = """
import lmdb, sys
env = lmdb.open(sys.argv[1], max_dbs=8)
db = env.open_db(b"synthetic/train")
with env.begin(write=True) as txn:
    key = (17).to_bytes(4, "big")
    v = bytearray(txn.get(key, db=db))
    v[48 + 100] ^= 0x01          # one payload bit; the header's checksum stays
    txn.put(key, bytes(v), db=db)
"""


def a_corrupted_value_is_caught_by_verify_and_refetched_by_the_reader():
    with zp.Workdir() as w:
        cfg = config(w, "bad", train=1000, test=0, epochs=1)
        rc, out, err = w.run("warm", cfg)
        zp.check(rc == 0, err)
        good, bad = os.path.join(w.path, "cache"), os.path.join(w.path, "copy")
        shutil.copytree(good, bad)
        subprocess.run(["/usr/bin/python3", "-c", FLIP, bad], check=True)
        rc, out, err = w.run("cache", "verify", bad)
        zp.check(rc == 1 and "synthetic/train key 17: checksum mismatch" in out, out + err)
        up(w, cfg, "run.name=clean")
        up(w, cfg, "run.name=dirty", "cache.path=" + bad)
        ev = cache_events(w.run_dir("dirty"), "train")[0]
        zp.check((ev["hits"], ev["misses"], ev["corrupt"]) == (999, 1, 1), "dirty run: %s" % ev)
        a = zp.epoch_ends(w.run_dir("clean"), "train")[0]
        b = zp.epoch_ends(w.run_dir("dirty"), "train")[0]
        zp.check(a["loss"] == b["loss"] and a["index_checksum"] == b["index_checksum"],
                 "trained on other data: loss %r vs %r" % (a["loss"], b["loss"]))
        rc, out, err = w.run("cache", "verify", bad)
        zp.check(rc == 0, "the refetched sample replaced the corrupt value: " + out)


READ = """
import lmdb, struct, sys
env = lmdb.open(sys.argv[1], readonly=True, lock=False, max_dbs=8)
db = env.open_db(b"fashion-mnist/train", create=False)
with env.begin() as txn:
    v = txn.get((int(sys.argv[2])).to_bytes(4, "big"), db=db)
magic, ver, dtype, ndim, _, c, h, w, label, index, nbytes = struct.unpack("<4sBBBBIIIiII", v[:32])
print(magic.decode(), dtype, c, h, w, label, index, nbytes)
if dtype == 1:
    print(" ".join("%.7f" % x for x in struct.unpack("<%df" % (nbytes // 4), v[48:48 + nbytes])))
else:
    print(" ".join("%d" % x for x in v[48:48 + nbytes]))
"""


def python_lmdb_reads_a_cached_sample_equal_to_the_idx_pixels():
    with zp.Workdir() as w:
        cfg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs",
                           "fashion-mnist.yaml")
        store = os.path.join(w.path, "fm-cache")
        rc, out, err = w.run("warm", cfg, "cache.path=" + store)
        zp.check(rc == 0 and "holds 70000 of 70000" in out, out + err)
        # the progress line's estimate of the whole cache: what `cache stat` projects, once whole
        said = re.findall(r"about ([0-9.]+) MiB whole", err)
        rc, stat, e2 = w.run("cache", "stat", store, "--json")
        projected = sum(d["projected_bytes"] for d in json.loads(stat)["databases"]) / 1048576
        zp.check(said and abs(float(said[-1]) - projected) <= 0.02 * projected,
                 "warm estimated %s MiB, cache stat projects %.1f:\n%s" % (said, projected, err))
        index = 12345
        r = subprocess.run(["/usr/bin/python3", "-c", READ, store, str(index)], capture_output=True,
                           text=True, check=True)
        head, values = r.stdout.splitlines()
        magic, dtype, c, h, wd, label, idx, nbytes = head.split()
        data = "/usr/share/datasets/fashion-mnist/"
        with gzip.open(data + "train-images-idx3-ubyte.gz") as f:
            pixels = f.read()[16 + index * 784:16 + (index + 1) * 784]
        with gzip.open(data + "train-labels-idx1-ubyte.gz") as f:
            want_label = f.read()[8 + index]
        zp.check((magic, dtype, c, h, wd, idx, nbytes) ==
                 ("ZPC1", "1", "1", "28", "28", str(index), "3136"), head)
        zp.check(int(label) == want_label, "label %s, IDX says %d" % (label, want_label))
        got = [float(x) for x in values.split()]
        want = [(p / 255.0 - 0.2860) / 0.3530 for p in pixels]
        worst = max(abs(a - b) for a, b in zip(got, want))
        zp.check(len(got) == 784 and worst < 1e-5, "pixels differ by up to %g" % worst)
        # dataset.dtype: uint8 keeps the IDX bytes themselves, a quarter of the size
        u8 = os.path.join(w.path, "fm-cache-u8")
        rc, out, err = w.run("warm", cfg, "cache.path=" + u8, "dataset.dtype=uint8")
        zp.check(rc == 0 and "holds 70000 of 70000" in out, out + err)
        r = subprocess.run(["/usr/bin/python3", "-c", READ, u8, str(index)], capture_output=True,
                           text=True, check=True)
        head, values = r.stdout.splitlines()
        zp.check(head.split()[:3] + head.split()[-2:] == ["ZPC1", "2", "1", str(index), "784"], head)
        zp.check(bytes(int(x) for x in values.split()) == pixels, "uint8 value is not the IDX pixels")
        if shutil.which("mdb_stat"):
            r = subprocess.run(["mdb_stat", "-s", "fashion-mnist/train", store], capture_output=True,
                               text=True)
            zp.check(r.returncode == 0 and "Entries: 60000" in r.stdout, r.stdout + r.stderr)


if __name__ == "__main__":
    zp.main([epoch_1_misses_epoch_2_hits_and_batches_equal_an_uncached_run,
             hits_read_by_several_threads_are_the_batches_one_thread_reads,
             warm_killed_midway_resumes_without_reloading_finished_keys,
             a_fingerprint_mismatch_is_refused_and_rebuild_rebuilds,
             a_full_map_stops_caching_with_one_warning_and_the_run_completes,
             a_corrupted_value_is_caught_by_verify_and_refetched_by_the_reader,
             python_lmdb_reads_a_cached_sample_equal_to_the_idx_pixels])
