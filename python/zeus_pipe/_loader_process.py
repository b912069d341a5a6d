"""python -m zeus_pipe._loader_process --run DIR --instance I ... — a loader of a
`dataset.source: python` run, started by `zeus-pipe up`, `scale`, autoscale
and `zeus-pipe loader --connect` in place of `zeus-pipe stage loader`, with
the same arguments.

The loader protocol is libzeuspipe.so's (zp_loader_serve2,
pipeline/include/zeus_pipe_loader.h): credit, tasks, heartbeats, SAMPLES,
retirement and refusal all happen there, and it calls back here for each
sample: seed the generators from (seed, split, epoch, index), call
__getitem__, pack the item's fields into the sample's record. With an
augment step on the split (dataset.python.augment.SPLIT), the item is the
cache's record when it holds one (no __getitem__ on warm epochs), else
__getitem__'s, packed as the cache keeps it; the step, seeded again from
the same sample seed, makes the sample from it every epoch (the built-in
ops on a field, dataset.augment.*, are made by the library in C). A
__getitem__ that raises is reported with the index and the exception
(loader.on_error decides); one that never returns stops the heartbeats,
and the run gives its task to another loader."""
from __future__ import annotations

import ctypes
import os
import sys
import traceback

from . import _dataset
from ._lib import ZeusPipeError, load
from ._seed import sample_seed

# zp_loader_get2_fn (pipeline/include/zeus_pipe_loader.h)
GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32,
                       ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                       ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)


def _say(err: int, errlen: int, text: str) -> None:
    data = text.encode(errors="replace")[:errlen - 1] + b"\0"
    ctypes.memmove(err, data, len(data))


class Loader:
    """The run's Dataset, its layouts and augment steps, and the callback the
    library calls for each sample."""

    def __init__(self, run: str) -> None:
        desc = os.path.join(run, "dataset")
        self.spec = _dataset.load_spec(os.path.join(desc, "python.json"))
        with open(os.path.join(desc, "meta")) as f:
            meta = f.read()
        layout = _dataset.Layout.parse(meta)
        if layout is None:
            raise ZeusPipeError("%s: no fields (the probe writes them)"
                                % os.path.join(desc, "meta"))
        self.layout = layout
        cached = meta.find("\ncached\n")  # an augment step: the cache's records, before it
        self.cached = _dataset.Layout.parse(meta[cached:]) if cached >= 0 else None
        types = [line for line in meta.splitlines() if line.startswith("item_types ")]
        self.types = types[0].split()[1:] if types else []
        self.names = self.spec.get("fields") or None
        self.seed = int(self.spec.get("seed", 0))
        self.splits = [_dataset.build(self.spec, s) for s in _dataset.SPLITS]
        self.steps = [_dataset.augment_of(self.spec, s) for s in _dataset.SPLITS]
        if self.cached is not None:  # as the probe named them
            self.cached_names = _dataset.names_for(self.names, len(self.cached.fields))
            self.names = _dataset.names_for(self.names, len(self.layout.fields))
        self.get = GET(self._get)  # kept: the library calls it until serve returns

    def _get(self, ctx: int | None, split: int, index: int, epoch: int, cached: int | None,
             keep: int | None, record: int, nbytes: int, err: int, errlen: int) -> int:
        name = _dataset.SPLITS[split]
        try:
            seed = sample_seed(self.seed, split, epoch, index)
            if not keep:
                _dataset.seed_all(seed)
                item = self.splits[split][index]
                self.layout.pack(item, self.names, record, index, name)
                return 0
            # keep: the split has a step (the meta's `cached` fields), or the built-in ops
            assert self.cached is not None, "keep given, and the meta has no cached fields"
            step = self.steps[split]
            if not cached:  # a miss: __getitem__, packed as the cache keeps it
                _dataset.seed_all(seed)
                self.cached.pack(self.splits[split][index], self.cached_names, keep, index, name)
                if step is None:  # the built-in ops on a field: in C, from keep
                    return 0
                cached = keep
            assert step is not None, "a cached record, and the split has no augment step"
            item = self.cached.unpack(cached, self.types)
            _dataset.seed_all(seed)
            self.layout.pack(step(item), self.names, record, index, name)
            return 0
        except _dataset.FieldError as e:
            _say(err, errlen, str(e))
            return 1
        except Exception as e:  # the user's __getitem__: the index, the split, the exception
            where = traceback.extract_tb(e.__traceback__)[-1]
            _say(err, errlen, "%s sample %d: %s: %s (%s:%d)" % (
                name, index, type(e).__name__, e, os.path.basename(where.filename),
                where.lineno or 0))
            return 1
        except BaseException as e:  # KeyboardInterrupt, SystemExit: stop this loader
            _say(err, errlen, "%s sample %d: %s" % (name, index, type(e).__name__))
            return -1


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if "--run" not in argv[:-1]:
        print(__doc__, file=sys.stderr)
        return 2
    run = argv[argv.index("--run") + 1]
    try:
        lib = load()
        lib.zp_loader_serve2.restype = ctypes.c_int
        lib.zp_loader_serve2.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), GET,
                                         ctypes.c_void_p]
        loader = Loader(run)
    except ZeusPipeError as e:
        print("zeus_pipe._loader_process: %s" % e, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        print("zeus_pipe._loader_process: the Dataset could not be built here (as the probe built it)",
              file=sys.stderr)
        return 2
    args = [a.encode() for a in argv[1:]]
    status: int = lib.zp_loader_serve2(len(args), (ctypes.c_char_p * len(args))(*args), loader.get, None)
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
