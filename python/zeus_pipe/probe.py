"""python -m zeus_pipe.probe SPEC [ANSWER] — the probe of a `dataset.source:
python` Dataset, run once by the supervisor before any stage starts
(pipeline/dataset/python.c): imports the callable, builds each split, takes its
len() and item 0 (and, with an augment step, what the step makes of item 0),
and writes what the run's description needs into the file ANSWER (standard
output without one; what the Dataset prints goes to standard output, the
log's, never into the answer):

    zeus-pipe probe 1
    n TRAIN TEST
    source_hash SHA256
    random DIFFERED TRIED
    fields K tuple|dict            the delivered sample's fields
    field NAME DTYPE NDIM D0 D1 ...
    augment TRAIN TEST             with dataset.python.augment.*: the splits
    cached                         that run a step, then the fields the cache
    fields K tuple|dict            keeps (what __getitem__ returns) and what
    field NAME DTYPE NDIM D0 ...   type each field was returned as
    item_types ndarray|tensor|int|float ...

`random`: with the cache on, a few items are drawn twice, under the sample
seeds of epochs 0 and 1; DIFFERED of TRIED came out different, which means
__getitem__ draws random numbers and the cache would freeze its first draw.

Exit status 0; 2 when the Dataset cannot be imported, built or read, or its
items are not fields zeus-pipe carries (the traceback's end on stderr)."""
from __future__ import annotations

import ctypes
import json
import sys
import traceback
from typing import Any

from ._dataset import (SPLITS, FieldError, Layout, augment_of, build, callable_of, item_types,
                       names_for, seed_all, source_hash)
from ._seed import sample_seed


def draws_differ(spec: dict[str, Any], ds: Any, split: str, n: int, layout: Layout,
                 names: list[str] | None) -> tuple[int, int]:
    """(differed, tried): of up to three items drawn under two epochs' seeds."""
    seed, picks = spec.get("seed", 0), sorted({0, n // 2, n - 1})
    differed = 0
    for i in picks:
        records = []
        for epoch in (0, 1):
            seed_all(sample_seed(seed, split, epoch, i))
            records.append(layout.record(ds[i], names, i, split))
        differed += records[0] != records[1]
    return differed, len(picks)


def same(what: str, first: Layout | None, here: Layout, hint: str = "") -> None:
    if first is not None and here.describe() != first.describe():
        raise FieldError("the test split's %s other fields than the train split's%s:\n"
                         "train: %s\ntest:  %s" % (what, hint, first.text(), here.text()))


def probe(spec: dict[str, Any]) -> str:
    n, cached, delivered, types, random = {}, None, None, None, [0, 0]
    names = spec.get("fields") or None
    steps = [augment_of(spec, split) for split in SPLITS]
    for split, step in zip(SPLITS, steps):
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
        item = ds[0]
        mine = names if not any(steps) else names_for(names, _count(item))
        here = Layout.of(item, mine)
        same("items have", cached, here)
        cached, cached_names, types = here, mine, types or item_types(item, mine)
        if step is not None:  # as the loaders do: on the item as the cache gives it back
            kept = ctypes.create_string_buffer(here.record(item, mine, 0, split))
            item = here.unpack(ctypes.addressof(kept), types)
            seed_all(sample_seed(spec.get("seed", 0), split, 0, 0))
            item = step(item)
            here = Layout.of(item, names_for(names, _count(item)) if names else None)
        same("delivered samples have", delivered, here,
             " (give dataset.python.augment.test a step that makes samples of the train "
             "step's fields and shapes, a center crop to the same size say)" if any(steps) else "")
        delivered = here
        if spec.get("cache", True):
            d, t = draws_differ(spec, ds, split, n[split], cached, cached_names)
            random[0] += d
            random[1] += t
    out = ["zeus-pipe probe 1", "n %d %d" % (n["train"], n["test"]),
           "source_hash %s" % source_hash(callable_of(spec)), "random %d %d" % tuple(random)]
    # build() raises for a config without a train split, and the loop for an empty one
    assert delivered is not None and cached is not None and types is not None
    text = "\n".join(out) + "\n" + delivered.describe()
    if any(steps):
        text += "augment %d %d\ncached\n%sitem_types %s\n" % (
            steps[0] is not None, steps[1] is not None, cached.describe(), " ".join(types))
    return text


def _count(item: Any) -> int:
    return len(item) if isinstance(item, (tuple, list)) else 0


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3) or argv[1] in ("-h", "--help"):
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
    if len(argv) == 3:
        with open(argv[2], "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
