"""zeus_pipe — a zeus-pipe run's batches in a PyTorch training loop, in place
of torch.utils.data.DataLoader.

    import zeus_pipe
    with zeus_pipe.attach() as zp:            # $ZP_RUN, $ZP_RANK: set by `zeus-pipe up`
        for epoch in range(EPOCHS):           # at most the run's trainer.epochs
            for x, y in zp.train:             # x: N,C,H,W float32 or uint8; y: int64
                with zp.region("forward"):
                    loss = F.cross_entropy(model(x), y)
                ...
            for x, y in zp.test:
                ...
            zp.log("test_epoch", epoch=epoch, accuracy=acc)

The program is rank r's trainer of a run that `zeus-pipe up` started with
`trainer.command` (libzeuspipe.so underneath: pipeline/zeus_pipe.h).

Order: the pipeline sends each epoch's train batches, then its test batches,
then the next epoch's. Iterating `train` gives the next train epoch,
iterating `test` the next test epoch; iterating one while the other's batches
come first raises ZeusPipeError (it does not hang). A loop left early
(`break`) leaves the rest of that epoch: the next iteration of the same split
releases those batches unread and starts the epoch after.

Lifetime (CPU): x is a view of the ring slot (torch.frombuffer over the
shared memory, no copy). It is valid until the next batch is taken: the slot
goes back to the pipeline when the loop asks for the next batch, or at the
end of the epoch. Keep one longer with x.clone(). Never use it after close().
y is made from the slot's int32 labels: one copy, into int64."""
import contextlib
import ctypes
import os

import torch

from ._lib import BATCH, END, EPOCH_END, F32, TEST, TRAIN, Batch, ZeusPipeError, load, strerror

__all__ = ["attach", "Client", "Source", "ZeusPipeError"]

_SPLIT = {TRAIN: "train", TEST: "test"}
_POLL_MS = 200  # zp_client_next waits this long at a time, so that Ctrl-C is seen


def attach(run=None, rank=None, timeout_s=60, config=None, overrides=None):
    """Attaches to rank `rank` of the run in folder `run` (defaults: $ZP_RUN,
    $ZP_RANK, else 0), waiting up to timeout_s for its ring. Returns a Client;
    raises ZeusPipeError with the library's sentence when it cannot.

    With config (a YAML file; overrides: {"key": value}) and neither run nor
    $ZP_RUN, the script starts the pipeline itself (`python3 train.py`, or
    torchrun: local rank 0 starts it for WORLD_SIZE ranks, each attaches as
    its RANK) and stops it when it exits: see _start.py. Under `zeus-pipe up`
    ($ZP_RUN set) config and overrides are not read: the run has its own."""
    if config is not None and run is None and not os.environ.get("ZP_RUN"):
        from ._start import start
        return start(config, overrides, timeout_s)
    run = run if run is not None else os.environ.get("ZP_RUN")
    if not run:
        raise ZeusPipeError("zeus_pipe.attach: no run: give attach(config=...) to start one, "
                            "attach(run=...), or start the program as trainer.command of "
                            "`zeus-pipe up`, which sets ZP_RUN")
    rank = int(rank if rank is not None else os.environ.get("ZP_RANK", "0"))
    return Client(run, rank, timeout_s)


class Client:
    """Rank r's side of a run: `.train` and `.test` sources, log(), region().
    Not thread-safe: one thread uses a client. close() (or `with`) detaches."""

    def __init__(self, run, rank, timeout_s=60):
        self._lib = load()
        err = ctypes.create_string_buffer(1024)
        self._c = self._lib.zp_client_attach(os.fsencode(run), rank, int(timeout_s * 1000),
                                             err, len(err))
        if not self._c:
            raise ZeusPipeError("zeus_pipe: " + err.value.decode(errors="replace"))
        self.run, self.rank = run, rank
        self._batch = Batch()   # the batch last taken from the library
        self._peeked = 0        # its kind, while it is taken but not handed out
        self._held = False      # the batch handed out, its slot not yet released
        self._step = 0          # train batches handed out
        self._epoch = 0         # the train epoch of the last train batch
        self._open = {}         # split -> epoch left unfinished by a loop that stopped early
        self.train = Source(self, TRAIN)
        self.test = Source(self, TEST)

    # ---- the library's batches ------------------------------------------------------------------

    def _check(self, rc, what):
        if rc < 0:
            raise ZeusPipeError("zeus_pipe: %s: %s" % (what, strerror(rc)))
        return rc

    def _release(self):
        if self._held:
            self._held = False
            self._check(self._lib.zp_client_release(self._c, ctypes.byref(self._batch)), "release")

    def _peek(self):
        """The kind of the next thing the pipeline sends, into self._batch."""
        if not self._c:
            raise ZeusPipeError("zeus_pipe: the client is closed")
        self._release()
        while not self._peeked:
            self._peeked = self._check(
                self._lib.zp_client_next(self._c, ctypes.byref(self._batch), _POLL_MS), "next")
        return self._peeked

    def _take(self):
        kind = self._peek()
        if kind != END:
            self._peeked = 0
        self._held = kind == BATCH
        return kind

    def _tensors(self):
        b = self._batch
        shape = (b.n, b.c, b.h, b.w)
        nbytes = b.n * b.sample_bytes
        if nbytes:
            mem = (ctypes.c_uint8 * nbytes).from_address(b.data)
            x = torch.frombuffer(mem, dtype=torch.float32 if b.dtype == F32 else torch.uint8)
        else:
            x = torch.empty(0, dtype=torch.float32 if b.dtype == F32 else torch.uint8)
        labels = (ctypes.c_int32 * b.n).from_address(b.labels) if b.n else None
        y = (torch.frombuffer(labels, dtype=torch.int32) if b.n else torch.empty(0, dtype=torch.int32))
        return x.view(shape), y.to(torch.int64)

    # ---- the user's side ------------------------------------------------------------------------

    @property
    def step(self):
        """Train batches handed out so far."""
        return self._step

    @property
    def indices(self):
        """The sample indices (in the split) of the batch last handed out, as
        int64 (a copy); valid while that batch is."""
        b = self._batch
        if not self._held or not b.n:
            return torch.empty(0, dtype=torch.int64)
        mem = (ctypes.c_uint32 * b.n).from_address(b.indices)
        return torch.frombuffer(mem, dtype=torch.int32).to(torch.int64) & 0xFFFFFFFF

    def log(self, event="step", step=None, epoch=None, **metrics):
        """Appends {event, step, epoch, **metrics} (numbers) to the run's
        metrics.jsonl. step and epoch default to the train batches handed out
        and the current train epoch."""
        keys = [k.encode() for k in metrics]
        n = len(keys)
        rc = self._lib.zp_client_log(
            self._c, event.encode(), self._step if step is None else int(step),
            self._epoch if epoch is None else int(epoch), n, (ctypes.c_char_p * n)(*keys),
            (ctypes.c_double * n)(*[float(v) for v in metrics.values()]))
        self._check(rc, "log(%s)" % event)

    @contextlib.contextmanager
    def region(self, name):
        """Times the block as region `name` ("forward", "backward", ... the
        report's names): its samples appear in `zeus-pipe report`."""
        self._check(self._lib.zp_client_region_begin(self._c, name.encode()), "region(%r)" % name)
        try:
            yield
        finally:
            self._check(self._lib.zp_client_region_end(self._c, name.encode()), "region(%r)" % name)

    def close(self):
        """Detaches (zp_client_destroy); every tensor view of a slot is invalid
        after it. Safe twice."""
        if self._c:
            p = ctypes.c_void_p(self._c)
            self._lib.zp_client_destroy(ctypes.byref(p))
            self._c = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class Source:
    """One split's batches, DataLoader-shaped: iterating gives the split's
    next epoch as (x, y) (see the module's docstring for the order and the
    lifetime of x); len() is this rank's batches per epoch."""

    def __init__(self, client, split):
        self._client, self.split = client, split
        self.name = _SPLIT[split]
        self._len = int(client._check(client._lib.zp_client_batches(client._c, split), "batches"))

    def __len__(self):
        return self._len

    def _order_error(self, b, kind):
        what = ("the end of the run" if kind == END else "%s epoch %d%s" % (
            _SPLIT[b.split], b.epoch, "'s end" if kind == EPOCH_END else ""))
        other = _SPLIT[1 - self.split]
        return ZeusPipeError(
            "zeus_pipe: iterating %s, but the pipeline sends %s next: it sends each epoch's "
            "train batches, then its test batches; read `for x, y in %s` first" % (
                self.name, what, other) if kind != END else
            "zeus_pipe: iterating %s, but the run has ended: no more epochs (trainer.epochs "
            "in the run's config)" % self.name)

    def _skip_unfinished(self):
        c = self._client
        if self.split not in c._open:
            return
        del c._open[self.split]
        while True:
            kind = c._peek()
            if kind == END or c._batch.split != self.split:
                return
            c._take()
            if kind == EPOCH_END:
                return

    def __iter__(self):
        c = self._client
        self._skip_unfinished()
        kind = c._peek()
        if kind == END or c._batch.split != self.split:
            raise self._order_error(c._batch, kind)
        return self._epoch()

    def _epoch(self):
        c = self._client
        c._open[self.split] = True
        try:
            while True:
                kind = c._take()
                if kind != BATCH:
                    c._open.pop(self.split, None)
                    return  # the epoch's end (or the run's, when it was cut short)
                if self.split == TRAIN:
                    c._step += 1
                    c._epoch = int(c._batch.epoch)
                yield c._tensors()
        finally:
            if c._c:
                c._release()
