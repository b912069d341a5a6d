"""_dataset.py — a user's map-style Dataset as zeus-pipe's loaders see it
(`dataset.source: python`): built from the run's SPEC, its items described
as fields and packed into records.

SPEC (RUN/dataset/python.json, written by the supervisor from the config's
dataset.python.*): {"class": "module:callable", "path": [folders put first on
sys.path], "args": {kwargs}, "splits": {"train": {kwargs}, "test": {kwargs}},
"fields": [names of a tuple item's fields], "seed": N, "version": "..."}.

An item is a tuple (or list) or a dict of fields; each field is a numpy
array, a CPU torch tensor, or a Python int (int64) or float (float64), of
one of the element types below, and every item of a split has the same
fields with the same types and shapes. A sample's record lays the fields
out as pipeline/dataset/fields.h says: each at an offset aligned to its element
size, the record padded to a multiple of its largest element size."""
from __future__ import annotations

import ctypes
import hashlib
import importlib
import inspect
import json
import random
import sys
from typing import Any, Callable, Sequence

import numpy as np

from . import _seed
from ._seed import sample_seed as sample_seed  # as before _seed.py: tests import it from here

SPLITS = ("train", "test")
# element types, numbered as pipeline/dataset/fields.h's ZP_FT_* and zeus_pipe.h's ZP_CLIENT_*
DTYPES = {"float32": 1, "uint8": 2, "int8": 3, "int16": 4, "int32": 5, "int64": 6,
          "float16": 7, "bfloat16": 8, "float64": 9}
SIZES = {"float32": 4, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
         "float16": 2, "bfloat16": 2, "float64": 8}
MAX_RECORD = 16 << 20  # ZP_MAX_ELEMS bytes: what one sample may take on the wire


class FieldError(ValueError):
    """An item whose fields zeus-pipe cannot carry, or that differ from the
    split's first item: the sentence names the field and what was expected."""


def load_spec(path: str) -> dict[str, Any]:
    with open(path) as f:
        spec: dict[str, Any] = json.load(f)
        return spec


def callable_of(spec: dict[str, Any]) -> Any:
    """The callable spec["class"] names, its folders first on sys.path."""
    for folder in reversed(spec.get("path", [])):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    module, _, name = spec["class"].partition(":")
    obj: Any = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def source_hash(obj: Any) -> str:
    """SHA-256 of the file that defines obj (part of the cache's fingerprint),
    or of its qualified name when it has no file."""
    try:
        path = inspect.getsourcefile(obj) or inspect.getfile(obj)
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except (TypeError, OSError):
        return hashlib.sha256(spec_name(obj).encode()).hexdigest()


def spec_name(obj: object) -> str:
    return "%s.%s" % (getattr(obj, "__module__", "?"), getattr(obj, "__qualname__", repr(obj)))


def augment_of(spec: dict[str, Any], split: str) -> Callable[[Any], Any] | None:
    """The augment step of a split (dataset.python.augment.SPLIT: the object
    that module:callable names, called with each item after the cache), or
    None."""
    name = (spec.get("augment") or {}).get(split) or ""
    if not name:
        return None
    obj: object = callable_of(dict(spec, **{"class": name}))
    if not callable(obj):
        raise FieldError("dataset.python.augment.%s: %s is a %s, not a callable"
                         % (split, name, type(obj).__name__))
    return obj


def names_for(names: list[str] | None, count: int) -> list[str] | None:
    """dataset.python.fields for a tuple of `count` fields: they name the
    delivered sample's, and __getitem__'s too where an augment step leaves
    their number as it is (else __getitem__'s are named by default)."""
    return names if names and len(names) == count else None


def item_types(item: Any, names: list[str] | None) -> list[str]:
    """What each field of an item is (ndarray, tensor, int or float), so that
    a record read back from the cache is given to the augment step as
    __getitem__ returned it."""
    torch = sys.modules.get("torch")
    out = []
    for _, v in _named(item, names)[1]:
        if torch is not None and isinstance(v, torch.Tensor):
            out.append("tensor")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(type(v).__name__)
        else:
            out.append("ndarray")
    return out


def build(spec: dict[str, Any], split: str) -> Any:
    """The split's Dataset: the callable with args and the split's kwargs;
    None for a test split the config does not name (when it names splits)."""
    splits = spec.get("splits") or {}
    unknown = sorted(set(splits) - set(SPLITS))
    if unknown:
        raise FieldError("dataset.python.splits: %s: the splits are train and test"
                         % ", ".join(unknown))
    if splits and split not in splits:
        if split == "train":
            raise FieldError("dataset.python.splits names no train split")
        return None
    kwargs = dict(spec.get("args") or {})
    kwargs.update(splits.get(split) or {})
    return callable_of(spec)(**kwargs)


def _as_array(value: Any, where: str) -> tuple[np.ndarray[Any, Any], str]:
    """value as a numpy array of one of DTYPES (bfloat16 as its int16 bits)
    and that type's name."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, bytes)):
        raise FieldError("%s: a %s is not a field: return numpy arrays, CPU tensors, ints or "
                         "floats" % (where, type(value).__name__))
    if isinstance(value, int):
        return np.asarray(value, dtype=np.int64), "int64"
    if isinstance(value, float):
        return np.asarray(value, dtype=np.float64), "float64"
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        if value.device.type != "cpu":
            raise FieldError("%s: a tensor on %s: return CPU tensors (the pipeline copies them "
                             "to the GPU)" % (where, value.device))
        if value.dtype == torch.bfloat16:
            return value.detach().contiguous().view(torch.int16).numpy(), "bfloat16"
        value = value.detach().numpy()
    if isinstance(value, (list, tuple)):
        raise FieldError("%s: a %s is not a field (ragged, or a list of arrays?): return one "
                         "numpy array or tensor" % (where, type(value).__name__))
    if not isinstance(value, (np.ndarray, np.generic)):
        raise FieldError("%s: a %s is not a field: return numpy arrays, CPU tensors, ints or "
                         "floats" % (where, type(value).__name__))
    arr = np.asarray(value)
    name = arr.dtype.name
    if name not in DTYPES or arr.dtype.byteorder == ">":
        raise FieldError("%s: element type %s is not one of %s" % (where, arr.dtype,
                                                                     ", ".join(DTYPES)))
    return arr, name


def _named(item: Any, names: Sequence[str] | None) -> tuple[str, list[tuple[str, Any]]]:
    """(kind, [(name, value)]) of an item: a dict names its fields; a tuple's
    come from `names`, else image, label for a pair, else f0, f1, ..."""
    if isinstance(item, dict):
        return "dict", [(str(k), v) for k, v in item.items()]
    if not isinstance(item, (tuple, list)):
        item = (item,)
    if names and len(names) != len(item):
        raise FieldError("dataset.python.fields names %d fields, the item has %d"
                         % (len(names), len(item)))
    names = names or (["image", "label"] if len(item) == 2 else
                      ["f%d" % i for i in range(len(item))])
    return "tuple", list(zip(names, item))


_MISSING = object()
_memmove = ctypes.memmove
_I64, _F64 = ctypes.c_int64, ctypes.c_double


class Layout:
    """The fields of a split's items and their place in a record."""

    def __init__(self, kind: str, fields: Sequence[tuple[str, str, Sequence[int]]]) -> None:
        self._fast: list[tuple[str, np.dtype[Any], tuple[int, ...], int, int, str]] | None = None
        self.kind = kind  # "tuple" or "dict"
        # (name, dtype name, shape, offset in the record, bytes) of each field
        self.fields: list[tuple[str, str, tuple[int, ...], int, int]] = []
        end, most = 0, 1
        for name, dtype, shape in fields:
            size = SIZES[dtype]
            nbytes = size * int(np.prod(shape, dtype=np.int64))
            at = (end + size - 1) // size * size
            most = max(most, size)
            end = (at + nbytes + most - 1) // most * most
            self.fields.append((name, dtype, tuple(shape), at, nbytes))
        self.record_bytes = end
        if end > MAX_RECORD:
            raise FieldError("the item's fields take %d bytes, more than a sample may (%d)"
                             % (end, MAX_RECORD))

    @classmethod
    def of(cls, item: Any, names: list[str] | None) -> Layout:
        kind, named = _named(item, names)
        fields: list[tuple[str, str, Sequence[int]]] = []
        for name, value in named:
            arr, dtype = _as_array(value, "field %r" % name)
            if arr.ndim > 6:
                raise FieldError("field %r: %d dimensions, at most 6" % (name, arr.ndim))
            fields.append((name, dtype, arr.shape))
        return cls(kind, fields)

    def text(self) -> str:
        """The fields as a person reads them: "image: uint8 [3, 494, 398], label: int64 []"."""
        return ", ".join("%s: %s [%s]" % (name, dtype, ", ".join(str(d) for d in shape))
                         for name, dtype, shape, _, _ in self.fields)

    def describe(self) -> str:
        """The "fields" lines of RUN/dataset/meta (pipeline/dataset/fields.h)."""
        out = ["fields %d %s" % (len(self.fields), self.kind)]
        for name, dtype, shape, _, _ in self.fields:
            out.append("field %s %s %d%s" % (name, dtype, len(shape),
                                              "".join(" %d" % d for d in shape)))
        return "\n".join(out) + "\n"

    def _pack_fast(self, item: Any, names: list[str] | None, record: int) -> bool:
        """The common case, checked as cheaply as it can be: every field a
        C-contiguous numpy array of the right type and shape, or a Python
        int or float where the field is int64 or float64. False: let the
        careful path check (and name what is wrong)."""
        fast = self._fast
        if fast is None:
            fast = self._fast = [(name, np.dtype(dtype if dtype != "bfloat16" else "int16"), shape,
                                  at, nbytes, dtype) for name, dtype, shape, at, nbytes in self.fields]
        if self.kind == "dict":
            if type(item) is not dict or len(item) != len(fast):
                return False
            values: Sequence[Any] = [item.get(f[0], _MISSING) for f in fast]
        else:
            if type(item) is not tuple or len(item) != len(fast) or names is not None and \
                    len(names) != len(item):
                return False
            values = item
        for v, (name, dt, shape, at, nbytes, dtype) in zip(values, fast):
            t = type(v)
            if t is np.ndarray:
                if v.dtype != dt or v.shape != shape or dtype == "bfloat16" or \
                        not v.flags.c_contiguous:
                    return False
                _memmove(record + at, v.ctypes.data, nbytes)
            elif t is int and dtype == "int64" and -(1 << 63) <= v < (1 << 63):
                _I64.from_address(record + at).value = v
            elif t is float and dtype == "float64":
                _F64.from_address(record + at).value = v
            else:
                return False
        return True

    def record(self, item: Any, names: list[str] | None, index: int, split: str) -> bytes:
        """The item packed into a record, as bytes (for comparing two draws)."""
        buf = (ctypes.c_char * self.record_bytes)()
        self.pack(item, names, ctypes.addressof(buf), index, split)
        return bytes(buf)

    def unpack(self, record: int, types: list[str]) -> Any:
        """The item a record at address `record` holds, each field as `types`
        says (item_types), in fresh memory of its own: a tuple, or a dict."""
        torch = importlib.import_module("torch") if "tensor" in types else None
        values: list[Any] = []
        for (name, dtype, shape, at, nbytes), kind in zip(self.fields, types):
            arr = np.empty(shape, np.int16 if dtype == "bfloat16" else dtype)
            _memmove(arr.ctypes.data, record + at, nbytes)
            if kind == "int":
                values.append(int(arr))
            elif kind == "float":
                values.append(float(arr))
            elif kind == "tensor" and torch is not None:
                t = torch.from_numpy(arr)
                values.append(t.view(torch.bfloat16) if dtype == "bfloat16" else t)
            else:
                values.append(arr)
        if self.kind == "dict":
            return {f[0]: v for f, v in zip(self.fields, values)}
        return tuple(values)

    @classmethod
    def parse(cls, text: str) -> Layout | None:
        """The Layout of the "fields" lines of a RUN/dataset/meta (with
        text from its "cached" line on: the cache's records)."""
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.startswith("fields "):
                n, kind = int(line.split()[1]), line.split()[2]
                fields: list[tuple[str, str, Sequence[int]]] = []
                for f in lines[i + 1:i + 1 + n]:
                    w = f.split()
                    if len(w) > 4 and w[4] == "labels":  # the built-in sources' label column
                        continue
                    fields.append((w[1], w[2], tuple(int(d) for d in w[4:4 + int(w[3])])))
                return cls(kind, fields)
        return None

    def pack(self, item: Any, names: list[str] | None, record: int, index: int,
             split: str) -> None:
        """Writes item's fields into the record at address `record`; raises
        FieldError naming the field, the index and what was expected."""
        if self._pack_fast(item, names, record):
            return
        kind, named = _named(item, names)
        if kind != self.kind or len(named) != len(self.fields):
            raise FieldError("%s sample %d: a %s of %d fields, where item 0 was a %s of %d"
                             % (split, index, kind, len(named), self.kind, len(self.fields)))
        for (name, value), (want, dtype, shape, at, nbytes) in zip(named, self.fields):
            if name != want:
                raise FieldError("%s sample %d: field %r where item 0 has %r"
                                 % (split, index, name, want))
            arr, got = _as_array(value, "%s sample %d: field %r" % (split, index, name))
            if got != dtype or arr.shape != shape:
                raise FieldError("%s sample %d: field %r is %s %s, item 0's is %s %s"
                                 % (split, index, name, got, list(arr.shape), dtype, list(shape)))
            if not arr.flags.c_contiguous:
                arr = np.ascontiguousarray(arr)
            _memmove(record + at, arr.__array_interface__["data"][0], nbytes)


def seed_all(s: int) -> None:
    """Seeds Python's random, NumPy's global generator and (when imported)
    torch's default generator with s, before a __getitem__; sample_seed()
    says s until the next."""
    _seed._current[0] = s
    random.seed(s)
    np.random.seed(s & 0xFFFFFFFF)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.default_generator.manual_seed(s)
