"""python -m zeus_pipe.probe SPEC — the probe of a `dataset.source: python`
Dataset, run once by the supervisor before any stage starts
(pipeline/runtime/python.c): imports the callable, builds each split, takes its
len() and item 0, and prints what the run's description needs:

    zeus-pipe probe 1
    n TRAIN TEST
    source_hash SHA256
    fields K tuple|dict
    field NAME DTYPE NDIM D0 D1 ...

Exit status 0; 2 when the Dataset cannot be imported, built or read, or its
items are not fields zeus-pipe carries (the traceback's end on stderr)."""
import json
import sys
import traceback

from ._dataset import FieldError, Layout, build, callable_of, seed_all, sample_seed, source_hash


def probe(spec):
    n, layout = {}, None
    names = spec.get("fields") or None
    for split in ("train", "test"):
        ds = build(spec, split)
        if ds is None:
            n[split] = 0
            continue
        if not hasattr(ds, "__len__") or not hasattr(ds, "__getitem__"):
            raise FieldError("%s: %s's %s split has no __len__ and __getitem__: zeus-pipe reads "
                             "map-style Datasets" % (spec["class"], type(ds).__name__, split))
        n[split] = len(ds)
        if n[split] == 0:
            raise FieldError("the %s split has no samples (len() is 0): give it samples, or no "
                             "test split (dataset.python.splits without test)" % split)
        seed_all(sample_seed(spec.get("seed", 0), split, 0, 0))
        here = Layout.of(ds[0], names)
        if layout is None:
            layout = here
        elif here.describe() != layout.describe():
            raise FieldError("the test split's item 0 has other fields than the train split's:\n"
                             "train: %stest: %s" % (layout.describe(), here.describe()))
    out = ["zeus-pipe probe 1", "n %d %d" % (n["train"], n["test"]),
           "source_hash %s" % source_hash(callable_of(spec))]
    return "\n".join(out) + "\n" + layout.describe()


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    try:
        text = probe(json.loads(argv[1]))
    except FieldError as e:
        print("zeus_pipe.probe: %s" % e, file=sys.stderr)
        return 2
    except BaseException:  # the user's import or constructor: its traceback's end
        traceback.print_exc()
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
