"""python -m zeus_pipe.loader --run DIR --instance I ... — a loader of a
`dataset.source: python` run, started by `zeus-pipe up`, `scale`, autoscale
and `zeus-pipe loader --connect` in place of `zeus-pipe stage loader`, with
the same arguments.

The loader protocol is libzeuspipe.so's (zp_loader_serve,
pipeline/include/zeus_pipe_loader.h): credit, tasks, heartbeats, SAMPLES,
retirement and refusal all happen there, and it calls back here for each
sample: seed the generators from (seed, split, epoch, index), call
__getitem__, pack the item's fields into the sample's record. A
__getitem__ that raises is reported with the index and the exception
(loader.on_error decides); one that never returns stops the heartbeats,
and the run gives its task to another loader."""
import ctypes
import os
import sys
import traceback

from . import _dataset
from ._lib import ZeusPipeError, load

GET = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32,
                       ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
                       ctypes.c_size_t)


def _say(err, errlen, text):
    data = text.encode(errors="replace")[:errlen - 1] + b"\0"
    ctypes.memmove(err, data, len(data))


class Loader:
    def __init__(self, run):
        desc = os.path.join(run, "dataset")
        self.spec = _dataset.load_spec(os.path.join(desc, "python.json"))
        with open(os.path.join(desc, "meta")) as f:
            self.layout = _dataset.Layout.parse(f.read())
        self.names = self.spec.get("fields") or None
        self.seed = int(self.spec.get("seed", 0))
        self.splits = [_dataset.build(self.spec, s) for s in _dataset.SPLITS]
        self.get = GET(self._get)  # kept: the library calls it until serve returns

    def _get(self, ctx, split, index, epoch, record, nbytes, err, errlen):
        name = _dataset.SPLITS[split]
        try:
            _dataset.seed_all(_dataset.sample_seed(self.seed, split, epoch, index))
            item = self.splits[split][index]
            self.layout.pack(item, self.names, record, index, name)
            return 0
        except _dataset.FieldError as e:
            _say(err, errlen, str(e))
            return 1
        except Exception as e:  # the user's __getitem__: the index, the split, the exception
            where = traceback.extract_tb(e.__traceback__)[-1]
            _say(err, errlen, "%s sample %d: %s: %s (%s:%d)" % (
                name, index, type(e).__name__, e, os.path.basename(where.filename), where.lineno))
            return 1
        except BaseException as e:  # KeyboardInterrupt, SystemExit: stop this loader
            _say(err, errlen, "%s sample %d: %s" % (name, index, type(e).__name__))
            return -1


def main(argv):
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if "--run" not in argv[:-1]:
        print(__doc__, file=sys.stderr)
        return 2
    run = argv[argv.index("--run") + 1]
    try:
        lib = load()
        lib.zp_loader_serve.restype = ctypes.c_int
        lib.zp_loader_serve.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), GET,
                                        ctypes.c_void_p]
        loader = Loader(run)
    except ZeusPipeError as e:
        print("zeus_pipe.loader: %s" % e, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        print("zeus_pipe.loader: the Dataset could not be built here (as the probe built it)",
              file=sys.stderr)
        return 2
    args = [a.encode() for a in argv[1:]]
    status = lib.zp_loader_serve(len(args), (ctypes.c_char_p * len(args))(*args), loader.get, None)
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
