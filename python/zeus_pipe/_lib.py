"""_lib.py — libzeuspipe.so through ctypes: finding it, and the prototypes of
pipeline/include/zeus_pipe.h that the package calls.

The constants and the structures below mirror the header's by hand, at
API_VERSION: tests/integration/test_abi.py holds each field's offset and
size, each struct's size and every constant against what the compiler makes
of the header, so change them together.

The library is looked for, in order: the path in $ZP_LIBRARY (`zeus-pipe up`
sets it for a trainer.command to its own), the build/ folder of the checkout
this package sits in (python/../build), beside the zeus-pipe binary ($ZP_BIN,
else the one on PATH) or in the folder above it (where `cmake --install`
puts it), then the system's loader path (ldconfig, LD_LIBRARY_PATH). load() raises
ZeusPipeError naming every place tried and why it failed."""
from __future__ import annotations

import ctypes
import os
import shutil
from typing import Any, Iterator

API_VERSION = 7  # ZP_CLIENT_API_VERSION this package was written for (zp_client_resume_ranks)

BATCH, EPOCH_END, END = 1, 2, 3  # what zp_client_next returned
TRAIN, TEST = 0, 1
F32, U8 = 1, 2
PLAN_TRAIN, PLAN_TEST, PLAN_TEST_FIRST = 1, 2, 4  # zp_client_seek's plan bits


class ZeusPipeError(RuntimeError):
    """A failure of zeus_pipe: the library, the run, or the order of use."""


IN_LABELS = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1  # ZP_CLIENT_IN_LABELS
ITEM_DICT = 1  # ZP_CLIENT_ITEM_DICT
# ZP_CLIENT_* element types by name (pipeline/dataset/fields.h numbers them alike)
DTYPES: dict[int, str] = {1: "float32", 2: "uint8", 3: "int8", 4: "int16", 5: "int32",
                          6: "int64", 7: "float16", 8: "bfloat16", 9: "float64"}


class Field(ctypes.Structure):
    """zp_client_field_t: one field of every sample."""
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("normalize", ctypes.c_int),
        ("shape", ctypes.c_int64 * 6),
        ("offset", ctypes.c_size_t),
        ("bytes", ctypes.c_size_t),
        ("reserved", ctypes.c_uint64 * 4),
    ]


class Batch(ctypes.Structure):
    """zp_client_batch_t: the pointers are into a ring slot, valid until the
    batch is released."""
    _fields_ = [
        ("kind", ctypes.c_int),
        ("split", ctypes.c_int),
        ("epoch", ctypes.c_uint64),
        ("index", ctypes.c_uint64),
        ("batches", ctypes.c_uint64),
        ("n", ctypes.c_int64),
        ("indices", ctypes.c_void_p),
        ("labels", ctypes.c_void_p),
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("c", ctypes.c_int64),
        ("h", ctypes.c_int64),
        ("w", ctypes.c_int64),
        ("sample_bytes", ctypes.c_size_t),
        ("samples", ctypes.c_int64),
        ("expected", ctypes.c_int64),
        ("slot", ctypes.c_uint64),
        ("gen", ctypes.c_uint64),
        ("fields", ctypes.POINTER(Field)),
        ("nfields", ctypes.c_int64),
        ("reserved", ctypes.c_uint64 * 6),
    ]


class RunInfo(ctypes.Structure):
    """zp_client_run_t: what fixes the order of the run's batches."""
    _fields_ = [
        ("seed", ctypes.c_uint64),
        ("world", ctypes.c_int64),
        ("rank", ctypes.c_int64),
        ("batch_size", ctypes.c_int64),
        ("epochs", ctypes.c_int64),
        ("samples", ctypes.c_int64 * 2),
        ("batches", ctypes.c_int64 * 2),
        ("shuffle", ctypes.c_int),
        ("drop_last", ctypes.c_int),
        ("classes", ctypes.c_int64),
        ("augment", ctypes.c_int64),
        ("reserved", ctypes.c_uint64 * 6),
    ]


def _candidates() -> Iterator[tuple[str, str]]:
    """(where, path) in the order they are tried."""
    env = os.environ.get("ZP_LIBRARY")
    if env:
        yield "$ZP_LIBRARY", env
    here = os.path.dirname(os.path.abspath(__file__))
    yield "the checkout's build/", os.path.join(here, "..", "..", "build", "libzeuspipe.so")
    exe = os.environ.get("ZP_BIN") or shutil.which("zeus-pipe")
    if exe:  # a build folder, or an installed one: P/lib/zeus-pipe/zeus-pipe, P/lib/libzeuspipe.so.1
        folder = os.path.dirname(os.path.realpath(exe))
        yield "beside zeus-pipe", os.path.join(folder, "libzeuspipe.so")
        yield "above zeus-pipe", os.path.join(folder, "..", "libzeuspipe.so.1")
    yield "the loader path", "libzeuspipe.so.1"


def _prototypes(lib: ctypes.CDLL) -> None:
    P, I, I64, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_char_p
    BP = ctypes.POINTER(Batch)
    sigs: dict[str, tuple[Any, list[Any]]] = {
        "zp_client_api_version": (I, []),
        "zp_client_strerror": (S, [I]),
        "zp_client_attach": (P, [S, I, I, ctypes.c_char_p, ctypes.c_size_t]),
        "zp_client_batches": (I64, [P, I]),
        "zp_client_fields": (I, [P, ctypes.POINTER(ctypes.POINTER(Field)), ctypes.POINTER(I)]),
        "zp_client_error": (S, [P]),
        "zp_client_set_step": (I, [P, I64]),
        "zp_client_any": (I, [P, I]),
        "zp_client_augment": (I, [P, BP, ctypes.c_void_p, ctypes.c_void_p]),
        "zp_client_normalization_table": (I, [P, ctypes.POINTER(ctypes.c_float), I]),
        "zp_client_next": (I, [P, BP, I]),
        "zp_client_release": (I, [P, BP]),
        "zp_client_run_info": (I, [P, ctypes.POINTER(RunInfo)]),
        "zp_client_seek": (I, [P, I, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint,
                               ctypes.c_char_p, ctypes.c_size_t]),
        "zp_client_seek_from": (I, [P, I, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64,
                                    ctypes.c_uint, ctypes.c_char_p, ctypes.c_size_t]),
        "zp_client_resume_entry": (I64, [P, I, ctypes.c_uint64, I, ctypes.c_uint64]),
        "zp_client_resume_ranks": (I64, [P, I, ctypes.c_uint64, I, ctypes.c_uint64,
                                         ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(I64)]),
        "zp_client_log": (I, [P, S, I64, I64, I, ctypes.POINTER(S),
                              ctypes.POINTER(ctypes.c_double)]),
        "zp_client_region_begin": (I, [P, S]),
        "zp_client_region_end": (I, [P, S]),
        "zp_client_destroy": (None, [ctypes.POINTER(P)]),
        "zp_client_ring": (I, [P, ctypes.POINTER(P), ctypes.POINTER(ctypes.c_size_t)]),
        "zp_client_normalization": (I, [P, ctypes.POINTER(ctypes.c_float),
                                        ctypes.POINTER(ctypes.c_float), I]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


_lib: ctypes.CDLL | None = None


def load() -> ctypes.CDLL:
    """The library, loaded once. Raises ZeusPipeError naming what was tried."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    for where, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append("%s %s: no such file" % (where, os.path.normpath(path)))
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s %s: %s" % (where, path, e))
            continue
        try:
            version = lib.zp_client_api_version()
            if version < API_VERSION:
                raise AttributeError("API version %d, this package needs %d" % (version, API_VERSION))
            _prototypes(lib)
        except AttributeError as e:
            tried.append("%s %s: too old (%s): rebuild zeus-pipe" % (where, path, e))
            continue
        _lib = lib
        return lib
    raise ZeusPipeError("zeus_pipe: libzeuspipe.so not found; tried " + "; ".join(tried) +
                        ". Build zeus-pipe (cmake --build build), or set ZP_LIBRARY to the "
                        "libzeuspipe.so beside the zeus-pipe binary")


def strerror(rc: int) -> str:
    """zp_client_strerror: the code's name and a sentence."""
    return str(load().zp_client_strerror(rc).decode(errors="replace"))
