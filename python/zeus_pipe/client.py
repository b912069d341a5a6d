"""client.py — Client, rank r's side of a run over libzeuspipe.so, and
Source, one split's batches as a DataLoader gives them (`zp.train`,
`zp.test`). docs/pytorch.md is the manual; this says what the code promises.

Order: the loop decides. Iterating `train` gives the next train epoch,
iterating `test` the next test epoch, in any order. The pipeline prepares
each epoch's train batches, then its test batches, ahead of the loop; when
the loop asks for a split that is not the one coming, the client seeks
(zp_client_seek): the pipeline drops what it prepared, starts there, and
learns the loop's pattern from it. A loop that reads only `train` gets only
train epochs from then on (the test split is never loaded again, after at
most 2 x prefetch.depth + prefetch.window unread batches: a ring's worth,
and those in flight behind it); a loop that reads `test` before `train` gets
each epoch's test batches first. The usual loop (train, then test, every
epoch) never seeks and never waits at an epoch's end. A loop left early (a
`break`, or next(iter(...))) leaves the rest of that epoch: the next loop
over that split starts the epoch after. The loop decides how many epochs it
runs; trainer.epochs caps them: an epoch past the cap has no batches (said
once on stderr), and trainer.epochs 0 is no cap.

Resume: state_dict() is the data position, a dict of plain ints; after
load_state_dict() in a new run of the same config, the next loops give
exactly the batches the first run would have got next, mid-epoch included.
A batch's samples depend only on the seed, the split, the epoch, the rank and
the batch size, never on the loaders or the cache; a state saved by a run of
another seed, batch size or dataset raises ZeusPipeError naming what
differs. Another world size goes on from where every rank had got to, with
a batch size that keeps batch_size x world where that changes too
(load_state_dict).

Lifetime (CPU): x is a view of the ring slot (torch.frombuffer over the
shared memory, no copy), owned by the pipeline: valid until the next batch
is taken, when the slot goes back (or at the end of the epoch). Keep one
longer with x.clone(); never use one after close(). y is made from the
slot's int32 labels: one copy, into int64. uint8 samples come as float32
normalised with the run's dataset.mean/std through the built-in trainer's
own table (one copy, the same bits as its batches), unless attach(raw=True)
asks for the uint8 pixels (a view, as above). A Python Dataset's fields are
views of the slot's records, with the same lifetime. With device="cuda" x
and y are copies on the GPU, the loop's own (_cuda.py).

DDP: every rank iterates its own shard, and len(train) is this rank's
batches. DistributedDataParallel needs every rank to take the same number of
steps (docs/ranks-and-nodes.md, "DDP with zeus_pipe", says when the ranks'
counts are equal): a rank with a batch more waits in its all-reduce while the
others wait for it at the epoch's end, and the run fails after
trainer.comm_timeout_s.

Save and stop: SIGUSR1 (`kill -USR1` of `zeus-pipe up`, which forwards it
to its program; Slurm's --signal=USR1@SECONDS before a time limit or a
preemption, which reaches every task) sets a flag that stop_requested()
reads, summed over the ranks (zp_client_any) so that every rank stops at the
same step. The handler is installed when the client is made, in the main
thread, where the program has none of its own for SIGUSR1. The pattern, once
a step, on every rank:

    if zp.stop_requested():
        torch.save({"model": model.state_dict(), "data": zp.state_dict()}, PATH)
        break

A Source asks its client through five members only: batches_per_epoch(),
samples(), batch_size, epochs and next_epoch(); the position of each split
(the next epoch and batch of its loop), the batch held and the seeks are the
client's. A subclass may watch every zp_client_next through the _heard hook
(_start.Started: a pipeline the script started)."""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Dict, Iterator, Mapping, Optional, Sequence, \
    SupportsFloat, Tuple, TypeVar, Union

from ._lib import (BATCH, DTYPES, END, EPOCH_END, F32, IN_LABELS, ITEM_DICT, PLAN_TEST,
                   PLAN_TEST_FIRST, PLAN_TRAIN, TEST, TRAIN, Batch, Field, RunInfo, ZeusPipeError,
                   load, strerror)

if TYPE_CHECKING:
    import torch

    from ._cuda import Device

# One field of every sample, as Client.fields lists it: (name, torch dtype
# name, shape, offset in the record or None for the batch's label column,
# bytes).
FieldInfo = Tuple[str, str, Tuple[int, ...], Optional[int], int]
# A batch of a Python Dataset's fields: a tuple in the item's order, or a
# dict when its items were dicts.
Fields = Union[Tuple["torch.Tensor", ...], Dict[str, "torch.Tensor"]]
# What iterating a Source gives: (x, y) for the built-in sources, a Python
# Dataset's Fields for its own. Which one is the run's config's, not the
# code's: Any, as DataLoader's batches are.
Item = Any
_Self = TypeVar("_Self", bound="Client")

_SPLIT = {TRAIN: "train", TEST: "test"}
_STOP = [False]    # SIGUSR1 came (stop_requested)
_CAUGHT = [False]  # ... and this package's handler sets _STOP


def _on_stop(signum: int, frame: object) -> None:
    _STOP[0] = True


def _catch_stop() -> None:
    """SIGUSR1 sets _STOP, where the program has no handler of its own (and
    in the main thread only, where Python lets one be set). `zeus-pipe up`
    starts its program with SIGUSR1 ignored ($ZP_RUN set), so that the
    signal cannot kill it before this."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        return
    now = signal.getsignal(signal.SIGUSR1)
    if now in (signal.SIG_DFL, None) or (now == signal.SIG_IGN and os.environ.get("ZP_RUN")):
        signal.signal(signal.SIGUSR1, _on_stop)
        _CAUGHT[0] = True


def _held(fn: Any, *args: Any) -> Any:
    """fn(*args), a library call that may wait, with SIGUSR1 held back until
    it returns: a handler's interruption (EINTR) would end its wait as a stop
    (the Ctrl-C it does stop on is not held)."""
    if not _CAUGHT[0]:
        return fn(*args)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        return fn(*args)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
_POLL_MS = 200  # zp_client_next waits this long at a time, so that Ctrl-C is seen


class _Torch:
    """torch, imported when the package first uses it: the loaders and the
    probe (python -m zeus_pipe._loader_process) of a Dataset that does not use torch
    never load it."""

    def __getattr__(self, name: str) -> Any:
        import torch as real
        globals()["torch"] = real
        return getattr(real, name)


if not TYPE_CHECKING:
    torch = _Torch()


class Client:
    """Rank r's side of a run: `.train` and `.test` sources, log(), region().
    Not thread-safe: one thread uses a client. close() (or `with`) detaches.
    zeus_pipe.attach() makes one."""

    run: str                 # the run's folder
    rank: int                # this program's rank
    train: Source            # the train split's batches
    test: Source             # the test split's batches
    fields: list[FieldInfo]  # every sample's fields
    normalized: str | None   # the field handed out normalised (dataset.python.normalize)

    def __init__(self, run: str | os.PathLike[str], rank: int, timeout_s: float = 60,
                 device: str | torch.device | None = None, raw: bool = False) -> None:
        self._c: int | None = None  # the zp_client_t, None once closed
        self._gpu: Device | None = None
        self._raw = raw
        self._lut: torch.Tensor | None = None
        cuda = None
        if device is not None and str(device) != "cpu":
            from . import _cuda
            cuda = _cuda.check(device)  # before attaching: a clear error, nothing held
        self._lib = load()
        _catch_stop()
        err = ctypes.create_string_buffer(1024)
        self._c = self._lib.zp_client_attach(os.fsencode(run), rank, int(timeout_s * 1000),
                                             err, len(err))
        if not self._c:
            raise ZeusPipeError("zeus_pipe: " + err.value.decode(errors="replace"))
        self.run, self.rank = os.fspath(run), rank
        self._batch = Batch()   # the batch last taken from the library
        self._peeked = 0        # its kind, while it is taken but not handed out
        self._held = False      # the batch handed out, its slot not yet released
        self._step = 0          # train batches handed out
        self._epoch = 0         # the train epoch of the last train batch
        self._open: dict[int, bool] = {}  # split -> left unfinished by a loop that stopped early
        # split -> [epoch, batch] its next loop starts at
        self._next: dict[int, list[int]] = {TRAIN: [0, 0], TEST: [0, 0]}
        # split -> the entry of that epoch's permutation its shards start at: 0 but
        # where a state of another number of ranks was loaded (load_state_dict)
        self._from: dict[int, int] = {TRAIN: 0, TEST: 0}
        self._last = -1         # the split the loop read last (-1: none yet)
        self._plan = PLAN_TRAIN | PLAN_TEST  # what the pipeline prepares (ZP_CLIENT_PLAN_*)
        self._loaded_plan: int | None = None  # a loaded state's plan, for the first seek after it
        self._info = RunInfo()
        self._check(self._lib.zp_client_run_info(self._c, ctypes.byref(self._info)), "run_info")
        self._read_fields()
        self._augment = bool(self._info.augment)
        if self._augment and (self._records or raw or cuda is not None):
            self.close()
            raise ZeusPipeError(
                "zeus_pipe: the run's config asks for train augmentation (dataset.augment.*), "
                "which the package applies to the built-in sources' normalised images on the "
                "CPU, as the built-in trainer does; %s: augment in your loop instead (and set "
                "dataset.augment's keys off), or attach on the CPU without raw=True" % (
                    "a Python Dataset's fields are its own" if self._records else
                    "raw=True keeps the pixels as they are" if raw else
                    "device=%r copies the ring's samples to the GPU first" % (device,)))
        self._per_epoch: dict[int, int] = {}  # split -> this rank's batches in each of its epochs
        for split in (TRAIN, TEST):
            n = self._check(self._lib.zp_client_batches(self._c, split), "batches")
            self._per_epoch[split] = int(n)
        self.train = Source(self, TRAIN)
        self.test = Source(self, TEST)
        if cuda is not None:
            try:
                self._gpu = _cuda.Device(self, cuda)
            except BaseException:
                self.close()
                raise

    # ---- the library's batches ------------------------------------------------------------------

    def _check(self, rc: int, what: str) -> int:
        if rc < 0:
            said = self._lib.zp_client_error(self._c) if self._c else None
            raise ZeusPipeError("zeus_pipe: %s: %s" % (what, said.decode(errors="replace") if said
                                                      else strerror(rc)))
        return rc

    def _release(self) -> None:
        if self._held:
            self._held = False
            self._check(self._lib.zp_client_release(self._c, ctypes.byref(self._batch)), "release")

    def _receive(self, timeout_ms: int) -> int:
        """zp_client_next into self._batch: what it returned, shown to
        _heard, then checked."""
        rc = _held(self._lib.zp_client_next, self._c, ctypes.byref(self._batch), timeout_ms)
        self._heard(rc, timeout_ms)
        return self._check(rc, "next")

    def _heard(self, rc: int, timeout_ms: int) -> None:
        """What zp_client_next returned, before it is checked: a hook for a
        client that watches its pipeline (_start.Started); nothing here."""

    def _peek(self) -> int:
        """The kind of the next thing the pipeline sends, into self._batch."""
        if not self._c:
            raise ZeusPipeError("zeus_pipe: the client is closed")
        self._release()
        while not self._peeked:
            self._peeked = self._receive(_POLL_MS)
        return self._peeked

    def _take(self) -> int:
        kind = self._peek()
        if kind != END:
            self._peeked = 0
        self._held = kind == BATCH
        return kind

    def _look_ahead(self) -> None:
        """device="cuda": takes the next batch if it is already there (a
        timeout of 0: no wait, and no wait counted) and starts its copy while
        the loop computes on this one. Only inside an epoch: its end (the
        ranks' sum) is taken when the loop asks for it."""
        b = self._batch
        if self._peeked or b.index + 1 >= b.batches:
            return
        self._peeked = self._receive(0)
        if self._peeked == BATCH and self._gpu:
            self._gpu.start(self._batch)

    def _read_fields(self) -> None:
        """The run's sample fields: (name, torch dtype name, shape, offset,
        bytes) each; `_records` is True unless they are the built-in (image,
        label), which keep their (x, y) with y int64."""
        table, item = ctypes.POINTER(Field)(), ctypes.c_int()
        n = self._check(self._lib.zp_client_fields(self._c, ctypes.byref(table),
                                                   ctypes.byref(item)), "fields")
        # offset None: the field is the batch's label column, not in the record
        self.fields = [(table[i].name.decode(), DTYPES[table[i].dtype],
                        tuple(table[i].shape[:table[i].ndim]),
                        None if table[i].offset == IN_LABELS else int(table[i].offset),
                        int(table[i].bytes)) for i in range(n)]
        self._dict = item.value == ITEM_DICT
        self.normalized = next((table[i].name.decode() for i in range(n) if table[i].normalize),
                               None)  # the field device="cuda" hands out normalised
        names = [f[0] for f in self.fields]
        self._records = not (names == ["image", "label"] and self.fields[1][3] is None)

    def split_fields(self, rec: torch.Tensor, n: int, normalize: bool = False) -> Fields:
        """The batch's fields from its records `rec` (uint8, n x sample_bytes,
        on the CPU or the GPU), as views: a tuple in the item's order, or a
        dict when the Dataset's items were dicts. normalize: the normalised
        field (dataset.python.normalize) as float32, unless attach(raw=True)."""
        out = []
        for name, dtype, shape, at, nbytes in self.fields:
            assert at is not None, "a record's fields all lie in the record"
            t = rec[:, at:at + nbytes].view(getattr(torch, dtype)).view((n,) + shape)
            if normalize and name == self.normalized and not self._raw:
                t = self._normalize(t)
            out.append(t)
        return dict(zip((f[0] for f in self.fields), out)) if self._dict else tuple(out)

    def _normalize(self, x: torch.Tensor) -> torch.Tensor:
        """uint8 pixels x (N, C, ...) as float32, normalised with the run's
        dataset.mean/std through the built-in trainer's own table (the same
        bits as its batches)."""
        if self._lut is None:
            room = 64
            table = (ctypes.c_float * (256 * room))()
            c = self._check(self._lib.zp_client_normalization_table(self._c, table, room),
                            "normalization_table")
            self._lut = torch.frombuffer(table, dtype=torch.float32)[:256 * c].clone().view(c, 256)
        c = self._lut.shape[0]
        offsets = (torch.arange(c, dtype=torch.int64) * 256).view((1, c) + (1,) * (x.dim() - 2))
        return self._lut.view(-1)[x.to(torch.int64) + offsets]

    def _tensors(self) -> Item:
        b = self._batch
        if self._gpu:
            xy = self._gpu.tensors(b)  # copied, and the slot released
            self._look_ahead()
            return xy
        if self._records:  # a Python Dataset's fields: views of the slot's records
            nbytes = b.n * b.sample_bytes
            rec = (torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(b.data), dtype=torch.uint8)
                   if nbytes else torch.empty(0, dtype=torch.uint8))
            return self.split_fields(rec.view(b.n, b.sample_bytes), b.n, normalize=True)
        shape = (b.n, b.c, b.h, b.w)
        nbytes = b.n * b.sample_bytes
        if nbytes:
            mem = (ctypes.c_uint8 * nbytes).from_address(b.data)
            x = torch.frombuffer(mem, dtype=torch.float32 if b.dtype == F32 else torch.uint8)
        else:
            x = torch.empty(0, dtype=torch.float32 if b.dtype == F32 else torch.uint8)
        labels = (ctypes.c_int32 * b.n).from_address(b.labels) if b.n else None
        y = (torch.frombuffer(labels, dtype=torch.int32) if b.n else torch.empty(0, dtype=torch.int32))
        x = x.view(shape)
        if x.dtype == torch.uint8 and not self._raw:  # as the built-in trainer: its very table
            x = self._normalize(x)
        if self._augment and b.split == TRAIN and b.n:  # as the built-in trainer, drawn alike
            out = torch.empty_like(x)
            if self._check(self._lib.zp_client_augment(self._c, ctypes.byref(b), x.data_ptr(),
                                                       out.data_ptr()), "augment"):
                x = out
        return x, y.to(torch.int64)

    # ---- a split's epochs: what a Source asks of its client -------------------------------------

    def batches_per_epoch(self, split: int) -> int:
        """This rank's batches in each epoch of `split` (TRAIN or TEST)."""
        return self._per_epoch[split]

    def samples(self, split: int) -> int:
        """The samples of `split` (TRAIN or TEST), all ranks together."""
        return int(self._info.samples[split])

    @property
    def batch_size(self) -> int:
        """prefetch.batch_size (the last batch of an epoch may be smaller)."""
        return int(self._info.batch_size)

    def next_epoch(self, split: int) -> Iterator[Item]:
        """The next epoch of `split` (what iterating `train` or `test` gives):
        an iterator of its batches as (x, y). The pipeline is moved there now,
        when what it sends next is not that epoch's next batch (see the
        module's docstring); an epoch past the run's cap, or of a split
        without batches, is empty."""
        if not self._per_epoch[split]:
            return iter(())  # a split without samples (or limited to none): nothing to seek
        start = self._begin(split)
        if start is None:
            return iter(())  # past the run's cap: an epoch of nothing
        e, b = start
        self._peek()
        while self._peeked == EPOCH_END and self._batch.split in self._open:
            del self._open[self._batch.split]  # the end of an epoch a loop left: nothing to read
            self._take()
            self._peek()
        self._open.pop(split, None)
        h = self._batch
        if self._from[split] or not (self._peeked == BATCH and
                                     (h.split, h.epoch, h.index) == (split, e, b)):
            self._seek(split, e, b)
        self._last = split
        return self._hand_out(split, e)

    _warned: ClassVar[int] = 0

    def _left_early(self, split: int, epoch: int, taken: int) -> None:
        """One line when an epoch is left before its end (a `break`, or a peek
        with next(iter(...))): its other batches are not handed out, and the
        next loop starts the epoch after. The first three times a run."""
        Client._warned += 1
        if Client._warned <= 3:
            name = _SPLIT[split]
            sys.stderr.write("zeus_pipe: %s epoch %d left after %d of %d batches (a break, or "
                             "next(iter(...))): the next loop over %s starts epoch %d%s\n" % (
                                 name, epoch, taken, self._per_epoch[split], name, epoch + 1,
                                 "" if Client._warned < 3 else "; not said again"))

    _capped: ClassVar[set[int]] = set()

    def _begin(self, split: int) -> tuple[int, int] | None:
        """Where this split's next loop starts: [epoch, batch], past a
        finished epoch's end; None past the run's cap (trainer.epochs), said
        once: the loop decides how many epochs it runs, the config caps them."""
        e, b = self._next[split]
        if b >= self._per_epoch[split] and not self._from[split]:
            e, b = e + 1, 0
        cap = self._info.epochs
        if cap and e >= cap:
            if split not in Client._capped:
                Client._capped.add(split)
                sys.stderr.write("zeus_pipe: %s epoch %d has no batches: the run gives epochs "
                                 "0..%d (trainer.epochs %d caps the loop; 0: no cap)\n" % (
                                     _SPLIT[split], e, cap - 1, cap))
            return None
        self._next[split] = [e, b]
        return e, b

    def _hand_out(self, split: int, e: int) -> Iterator[Item]:
        """Epoch e of `split`, batch by batch, its position kept in _next."""
        self._open[split] = True
        try:
            while True:
                kind = self._take()
                if kind != BATCH:
                    self._open.pop(split, None)
                    if kind == EPOCH_END:
                        self._next[split], self._from[split] = [e + 1, 0], 0
                    return  # the epoch's end (or the run's, when it was cut short)
                self._next[split] = [e, int(self._batch.index) + 1]
                if split == TRAIN:
                    self._step += 1
                    self._epoch = int(self._batch.epoch)
                yield self._tensors()
        except GeneratorExit:  # the loop was left early: its next loop starts the epoch after
            if split in self._open:
                self._next[split], self._from[split] = [e + 1, 0], 0
                self._left_early(split, e, int(self._batch.index) + 1)
            raise
        finally:
            if self._c:
                self._release()

    # ---- the user's side ------------------------------------------------------------------------

    @property
    def epochs(self) -> int | None:
        """The run's trainer.epochs: the most epochs of each split it gives
        (a loop may stop before); None for no cap (trainer.epochs 0)."""
        return int(self._info.epochs) or None

    @property
    def epoch(self) -> int:
        """The train epoch the next `for ... in zp.train` gives: 0 at the
        start, the epoch after a finished one, the saved position's after
        load_state_dict (the epoch to resume a `for epoch in range(...)` at)."""
        e, b = self._next[TRAIN]
        return e + 1 if b >= self._per_epoch[TRAIN] else e

    @property
    def classes(self) -> int:
        """The train split's number of classes (the built-in sources; 1 for a
        Python Dataset, whose targets are fields of its own)."""
        return int(self._info.classes)

    @property
    def class_names(self) -> list[str] | None:
        """An image folder's class names in label order (its sub-folders, as
        torchvision's ImageFolder.classes); None for other sources."""
        try:
            with open(os.path.join(self.run, "dataset", "classes"), "rb") as f:
                return [n.decode(errors="replace") for n in f.read().split(b"\0")[:-1]]
        except FileNotFoundError:
            return None

    @property
    def sample_shape(self) -> tuple[int, ...] | dict[str, tuple[int, ...]]:
        """One sample's shape: (C, H, W) of the built-in sources' images; a
        Python Dataset's, {field: shape} (see `fields`)."""
        if not self._records:
            return self.fields[0][2]
        return {name: shape for name, _, shape, _, _ in self.fields}

    @property
    def step(self) -> int:
        """Train batches handed out so far."""
        return self._step

    @property
    def indices(self) -> torch.Tensor:
        """The sample indices (in the split) of the batch last handed out, as
        int64 (a copy); valid while that batch is."""
        b = self._batch
        if self._gpu:
            return self._gpu.indices
        if not self._held or not b.n:
            return torch.empty(0, dtype=torch.int64)
        mem = (ctypes.c_uint32 * b.n).from_address(b.indices)
        return torch.frombuffer(mem, dtype=torch.int32).to(torch.int64) & 0xFFFFFFFF

    # ---- the data position ----------------------------------------------------------------------

    # what fixes the batches of a position: a state of another run's is refused
    _SAMPLING = ("seed", "batch_size", "train_samples", "test_samples")

    def _identity(self) -> dict[str, int]:
        i = self._info
        return dict(seed=int(i.seed), world=int(i.world), rank=int(i.rank),
                    batch_size=int(i.batch_size), train_samples=int(i.samples[0]),
                    test_samples=int(i.samples[1]), train_batches=int(i.batches[0]),
                    test_batches=int(i.batches[1]))

    def stop_requested(self) -> bool:
        """True once any rank's program was asked to save and stop (SIGUSR1;
        see the module's docstring), the same answer on every rank. Every
        rank calls it at the same point of its loop, as many times (once a
        step): it is a sum over the ranks, as an epoch's counts are."""
        if not self._c:
            raise ZeusPipeError("zeus_pipe: the client is closed")
        return bool(self._check(_held(self._lib.zp_client_any, self._c, int(_STOP[0])),
                                "stop_requested"))

    def state_dict(self) -> dict[str, int]:
        """The data position, a dict of plain ints: `split`, `epoch`, `batch`:
        the next batch not yet handed out of the split the loop read last
        (split -1 before any), of shards that start at entry `from` of that
        epoch's permutation (0 but after a state of another number of ranks
        was loaded); `other_epoch`: the epoch the other split's next loop
        gives; `plan`: the splits the loop reads (ZP_CLIENT_PLAN_* bits);
        `step`: train batches handed out; and what fixes the batches (seed,
        world, rank, batch_size, *_samples, *_batches)."""
        split = self._last
        e, b = self._next[split] if split >= 0 else (0, 0)
        other = self._next[1 - split][0] if split >= 0 else 0
        return dict(self._identity(), version=2, split=split, epoch=e, batch=b,
                    **{"from": self._from[split] if split >= 0 else 0},
                    other_epoch=other, plan=self._plan, step=self._step)

    def load_state_dict(self, d: Union[Mapping[str, int], Sequence[Mapping[str, int]]]) -> None:
        """Makes the next loops start where state_dict() was taken. Every rank
        may load the same rank's state (ranks that step together, as DDP's do,
        are at the same batch). A state of another number of ranks (world)
        goes on where every rank had got to: the rest of that epoch is
        sharded over this run's ranks, every sample of it still once, and the
        later epochs over them from their start. Its batch size may differ
        where batch_size x world, the global batch, is this run's.

        `d` may also be the list of every rank's state of one save (a program
        whose ranks save their own and need not be in step): the epoch goes
        on from the first sample some rank had not read; what a rank ahead had
        read past it is read again, said on stderr and counted as `repeats`
        in that epoch's record (in its samples, not in distinct).

        Raises ZeusPipeError for a state of another run's sampling (seed,
        batch size, samples: naming what differs) or one that is not a state
        of this package."""
        states = [d] if isinstance(d, Mapping) else list(d)
        try:
            states = [{k: int(v) for k, v in dict(x).items()} for x in states]
            missing = [k for x in states for k in ("split", "epoch", "batch", "other_epoch",
                                                   "plan", "world") if k not in x]
            if missing:
                raise KeyError(missing[0])
        except (KeyError, TypeError, ValueError) as err:
            raise ZeusPipeError("zeus_pipe: load_state_dict: not a state of zeus_pipe's "
                                "state_dict() (%s)" % err)
        if not states:
            raise ZeusPipeError("zeus_pipe: load_state_dict: an empty list of states")
        d = states[0]
        split, e, b, other, plan = d["split"], d["epoch"], d["batch"], d["other_epoch"], d["plan"]
        world, start = d["world"], d.get("from", 0)  # version 1: no from
        mine = self._identity()
        same_batch = d.get("batch_size") == mine["batch_size"]
        regrouped = not same_batch and world != mine["world"] and \
            d.get("batch_size", 0) * world == mine["batch_size"] * mine["world"]
        diff = ["%s %s (this run: %s)" % (k, d.get(k), mine[k]) for k in self._SAMPLING
                if d.get(k) != mine[k] and not (k == "batch_size" and regrouped)]
        if diff:
            raise ZeusPipeError("zeus_pipe: load_state_dict: the state is of a run with other "
                                "batches: " + ", ".join(diff) + "; resume with the config it "
                                "was saved with (a batch size may change where batch_size x "
                                "world stays %d)" % (d.get("batch_size", 0) * world))
        if split not in (-1, TRAIN, TEST) or plan & ~7 or world < 1 or start < 0:
            raise ZeusPipeError("zeus_pipe: load_state_dict: split %d, plan %d, world %d or from "
                                "%d out of range" % (split, plan, world, start))
        if len(states) > 1:
            keys = ("split", "epoch", "other_epoch", "plan", "world", "batch_size", "seed")
            odd = [k for k in keys + ("from",) if len({x.get(k, 0) for x in states}) > 1]
            ranks = sorted(x.get("rank", -1) for x in states)
            if odd or ranks != list(range(world)):
                raise ZeusPipeError(
                    "zeus_pipe: load_state_dict: a list of states must be one save of every rank: "
                    "%d states of ranks %s (of %d)%s" % (
                        len(states), ranks, world,
                        "; they differ in " + ", ".join(odd) if odd else ""))
            states.sort(key=lambda x: x["rank"])
        batches = [x["batch"] for x in states] if len(states) > 1 else [b] * world
        if split >= 0 and (world != mine["world"] or len(set(batches)) > 1):
            k = (ctypes.c_uint64 * world)(*batches)
            repeats = ctypes.c_int64(0)
            entry = self._lib.zp_client_resume_ranks(self._c, split, start, world,
                                                     d["batch_size"], k, ctypes.byref(repeats))
            if entry < 0:
                raise ZeusPipeError("zeus_pipe: load_state_dict: %s epoch %d from entry %d: out "
                                    "of range" % (_SPLIT[split], e, start))
            if mine["rank"] == 0:
                sys.stderr.write(
                    "zeus_pipe: load_state_dict: saved by %d ranks (batch size %d, at batch %s), "
                    "this run has %d (batch size %d): %s epoch %d goes on at entry %d of its %d%s\n"
                    % (world, d["batch_size"], ",".join(map(str, batches)), mine["world"],
                       mine["batch_size"], _SPLIT[split], e, entry, self.samples(split),
                        "; %d samples a rank had read past it are read again (the epoch's "
                        "record counts them as repeats)" % repeats.value if repeats.value else ""))
            start, b = int(entry), 0
            if entry >= self.samples(split):  # that epoch was over: the next starts from its beginning
                e, start = e + 1, 0
            d = min(states, key=lambda x: x.get("step", 0))
        self._release()
        self._open.clear()
        self._from = {TRAIN: 0, TEST: 0}
        if split < 0:
            self._next = {TRAIN: [0, 0], TEST: [0, 0]}
        else:
            self._next = {split: [e, b], 1 - split: [other, 0]}
            self._from[split] = start
        self._last, self._step, self._loaded_plan = split, d.get("step", 0), plan
        self._check(self._lib.zp_client_set_step(self._c, self._step), "set_step")
        self._epoch = self._next[TRAIN][0]

    def _seek(self, split: int, epoch: int, batch: int) -> None:
        """Moves the pipeline to batch `batch` of `split`'s epoch `epoch`,
        with the plan the loop shows (see the module's docstring)."""
        if self._loaded_plan is not None:
            plan = self._loaded_plan
        elif self._last < 0:  # the loop's first split comes first every epoch
            plan = PLAN_TRAIN | PLAN_TEST | (PLAN_TEST_FIRST if split == TEST else 0)
        elif self._last == split:  # this split again: the loop skips the other
            plan = PLAN_TRAIN if split == TRAIN else PLAN_TEST
        else:  # from the other split to this one: both, the other first
            plan = PLAN_TRAIN | PLAN_TEST | (PLAN_TEST_FIRST if self._last == TEST else 0)
        self._loaded_plan = None
        self._release()
        err = ctypes.create_string_buffer(512)
        rc = _held(self._lib.zp_client_seek_from, self._c, split, epoch, self._from[split], batch,
                   plan, err, len(err))
        if rc < 0:
            raise ZeusPipeError("zeus_pipe: " + (err.value.decode(errors="replace") or strerror(rc)))
        self._plan = plan
        # A batch taken from the library and not handed out goes back after the
        # SEEK: the prefetch hears the seek before it has that slot to fill again.
        if self._peeked == BATCH:
            if self._gpu:
                self._gpu.cancel()  # a copy started ahead from that slot ends first
            self._check(self._lib.zp_client_release(self._c, ctypes.byref(self._batch)), "release")
        self._peeked = 0
        self._open.clear()  # what loops left is released by the library before SEEKED
        # the batch taken ahead and given back counted as a step in the library: not one
        self._check(self._lib.zp_client_set_step(self._c, self._step), "set_step")

    def log(self, event: str = "step", step: int | None = None, epoch: int | None = None,
            **metrics: SupportsFloat) -> None:
        """Appends {event, step, epoch, **metrics} (numbers: anything float()
        takes, a one-element tensor too) to the run's metrics.jsonl. step and
        epoch default to the train batches handed out and the current train
        epoch."""
        keys = [k.encode() for k in metrics]
        n = len(keys)
        rc = self._lib.zp_client_log(
            self._c, event.encode(), self._step if step is None else int(step),
            self._epoch if epoch is None else int(epoch), n, (ctypes.c_char_p * n)(*keys),
            (ctypes.c_double * n)(*[float(v) for v in metrics.values()]))
        self._check(rc, "log(%s)" % event)

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        """Times the block as region `name` ("forward", "backward", ... the
        report's names): its samples appear in `zeus-pipe report`."""
        self._check(self._lib.zp_client_region_begin(self._c, name.encode()), "region(%r)" % name)
        try:
            yield
        finally:
            self._check(self._lib.zp_client_region_end(self._c, name.encode()), "region(%r)" % name)

    def close(self) -> None:
        """Detaches (zp_client_destroy); every tensor view of a slot is invalid
        after it. Safe twice."""
        if self._gpu:
            self._gpu.close()  # unregisters the ring before the library unmaps it
        if self._c:
            p = ctypes.c_void_p(self._c)
            self._lib.zp_client_destroy(ctypes.byref(p))
            self._c = None

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Source:
    """One split's batches, DataLoader-shaped: iterating gives the split's
    next epoch as (x, y) (see the module's docstring for the order and the
    lifetime of x); len() is this rank's batches per epoch."""

    split: int  # TRAIN (0) or TEST (1)
    name: str   # "train" or "test"

    def __init__(self, client: Client, split: int) -> None:
        self._client, self.split = client, split
        self.name = _SPLIT[split]
        self._len = client.batches_per_epoch(split)

    def __len__(self) -> int:
        return self._len

    @property
    def batch_size(self) -> int:
        """prefetch.batch_size (the last batch of an epoch may be smaller)."""
        return self._client.batch_size

    @property
    def samples(self) -> int:
        """The split's samples (all ranks together)."""
        return self._client.samples(self.split)

    @property
    def epochs(self) -> int | None:
        """How many epochs of this split the run gives (trainer.epochs)."""
        return self._client.epochs

    def __iter__(self) -> Iterator[Item]:
        return self._client.next_epoch(self.split)
