"""Exactly-once coverage and determinism on real processes: a synthetic
dataset trained with 1 and with 3 loaders gives, every epoch and split, every
sample exactly once (count, distinct count and index checksum) and the
identical sequence of batches (order digest) — and so identical losses."""
import zp


def run(w, workers):
    name = "loaders%d" % workers
    cfg = w.write(name + ".yaml", zp.SYNTH.format(name=name, train=3000, test=500, cost=0,
                                                   workers=workers, epochs=3))
    rc, out, err = w.run("up", cfg)
    zp.check(rc == 0, "exit %d\n%s\n%s" % (rc, out, err))
    return w.run_dir(name)


def every_epoch_delivers_each_sample_once_and_in_the_same_order_with_1_or_3_loaders():
    with zp.Workdir() as w:
        one, three = run(w, 1), run(w, 3)
        for split, n in (("train", 3000), ("test", 500)):
            a, b = zp.epoch_ends(one, split), zp.epoch_ends(three, split)
            zp.check(len(a) == 3 and len(b) == 3, "%s: %d and %d epoch records" % (split, len(a), len(b)))
            want = zp.index_checksum(range(n))
            for ra, rb in zip(a, b):
                for r in (ra, rb):
                    zp.check(r["samples"] == n and r["distinct"] == n and r["expected_samples"] == n,
                             "%s epoch %d: %d samples, %d distinct, want %d" %
                             (split, r["epoch"], r["samples"], r["distinct"], n))
                    zp.check(r["index_checksum"] == want, "%s epoch %d: checksum %s, want %s" %
                             (split, r["epoch"], r["index_checksum"], want))
                zp.check(ra["order_digest"] == rb["order_digest"],
                         "%s epoch %d: batch order differs between 1 and 3 loaders" % (split, ra["epoch"]))
                zp.check(ra["loss"] == rb["loss"], "%s epoch %d: loss %r vs %r" %
                         (split, ra["epoch"], ra["loss"], rb["loss"]))
        train = zp.epoch_ends(one, "train")
        zp.check(len({r["order_digest"] for r in train}) == 3, "shuffled epochs must differ in order")
        test = zp.epoch_ends(one, "test")
        zp.check(len({r["order_digest"] for r in test}) == 1, "the test split is not shuffled")


if __name__ == "__main__":
    zp.main([every_epoch_delivers_each_sample_once_and_in_the_same_order_with_1_or_3_loaders])
