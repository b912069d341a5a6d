"""zeus_pipe — a zeus-pipe run's batches in a PyTorch training loop, in place
of torch.utils.data.DataLoader.

    import zeus_pipe
    with zeus_pipe.attach() as zp:            # $ZP_RUN, $ZP_RANK: set by `zeus-pipe up`
        for epoch in range(EPOCHS):           # at most the run's trainer.epochs
            for x, y in zp.train:             # x: N,C,H,W float32; y: int64
                with zp.region("forward"):
                    loss = F.cross_entropy(model(x), y)
                ...
            for x, y in zp.test:
                ...
            zp.log("test_epoch", epoch=epoch, accuracy=acc)

The program is rank r's trainer of a run that `zeus-pipe up` started with
`trainer.command` (libzeuspipe.so underneath: pipeline/include/zeus_pipe.h).
The package: client.py (Client, Source), _start.py (attach(config=...): the
script starts the pipeline), _cuda.py (device="cuda"), _lib.py (the library
through ctypes: its structs and constants, held against the header's by
tests/integration/test_abi.py), and for `dataset.source: python` runs
loader.py, probe.py and _dataset.py.

Order: the loop decides. Iterating `train` gives the next train epoch,
iterating `test` the next test epoch, in any order. The pipeline prepares
each epoch's train batches, then its test batches, ahead of the loop; when
the loop asks for a split that is not the one coming, the package seeks
(zp_client_seek): the pipeline drops what it prepared and starts there, and
learns the loop's pattern from it: a loop that reads only `train` gets only
train epochs from then on (the test split is never loaded again, after at
most 2 x prefetch.depth + prefetch.window unread batches: a ring's worth, and
those in flight behind it); a loop that reads
`test` before `train` gets each epoch's test batches first. The usual loop
(train, then test, every epoch) never seeks and never waits at an epoch's
end. A loop left early (`break`) leaves the rest of that epoch: the next
iteration of that split starts the epoch after. The loop decides how many
epochs it runs; trainer.epochs caps them: an epoch past the cap has no
batches (said once on stderr), and trainer.epochs 0 is no cap. zp.epoch is
the train epoch the next loop over zp.train gives.

Resume: `zp.state_dict()` is the data position, a dict of plain ints to save
in your own checkpoint beside the model's and the optimizer's; after
`zp.load_state_dict(d)` in a new run of the same config, the batches are
exactly those the first run would have got next, mid-epoch included: inside
`for x, y in zp.train` it names the batch after the last one handed out, so
the next `for x, y in zp.train` gives the rest of that epoch (len(zp.train)
minus the batches already trained), then whole epochs again. A batch's
samples depend only on the seed, the split, the epoch, the rank and the
batch size, never on the loaders or the cache; loading a state saved by a
run of another seed, world size, batch size or dataset raises
ZeusPipeError naming what differs.

Lifetime (CPU): x is a view of the ring slot (torch.frombuffer over the
shared memory, no copy). It is valid until the next batch is taken: the slot
goes back to the pipeline when the loop asks for the next batch, or at the
end of the epoch. Keep one longer with x.clone(). Never use it after close().
y is made from the slot's int32 labels: one copy, into int64. uint8 samples
(dataset.dtype: uint8) come as float32 normalised with the run's
dataset.mean/std through the built-in trainer's own table (one copy; the
same bits as its batches), unless attach(raw=True) asks for the uint8
pixels themselves (a view, as above).

device="cuda" (attach(..., device="cuda")): x and y are on the GPU, the
loop's own (the slot goes back once they are copied); uint8 batches come as
float32 normalised with the run's dataset.mean/std. See _cuda.py.

DDP: every rank iterates its own shard, and `len(train)` is this rank's
batches. DistributedDataParallel needs every rank to take the same number of
steps: a split of n samples on W ranks gives equal counts when n is a
multiple of W; otherwise the ranks differ by one batch exactly when
ceil(n/W) (with prefetch.drop_last: true) or floor(n/W) (without) is a
multiple of prefetch.batch_size. A rank with a batch more waits in its
all-reduce while the others wait for it at the epoch's end (where the ranks
sum their coverage): the run fails after trainer.comm_timeout_s."""
import os

from ._dataset import sample_seed
from ._lib import (BATCH, DTYPES, END, EPOCH_END, F32, IN_LABELS, ITEM_DICT, PLAN_TEST,
                   PLAN_TEST_FIRST, PLAN_TRAIN, TEST, TRAIN, Batch, Field, RunInfo, ZeusPipeError,
                   load, strerror)
from .client import Client, Source

# what a program uses; the constants and ctypes structures of _lib.py above
# (TRAIN, TEST, Batch, ...) stay importable from zeus_pipe as before
__all__ = ["attach", "Client", "Source", "ZeusPipeError", "sample_seed"]


def attach(run=None, rank=None, timeout_s=60, device=None, config=None, overrides=None, raw=False):
    """Attaches to rank `rank` of the run in folder `run` (defaults: $ZP_RUN,
    $ZP_RANK, else 0), waiting up to timeout_s for its ring. device: None
    (or "cpu") for CPU views of the ring, "cuda" or "cuda:N" for batches
    copied to that GPU. Returns a Client; raises ZeusPipeError with the
    library's sentence when it cannot (also: a device without CUDA).

    With config (a YAML file; overrides: {"key": value}) and neither run nor
    $ZP_RUN, the script starts the pipeline itself (`python3 train.py`, or
    torchrun: local rank 0 starts it for WORLD_SIZE ranks, each attaches as
    its RANK) and stops it when it exits: see _start.py. Under `zeus-pipe up`
    ($ZP_RUN set) config and overrides are not read: the run has its own."""
    if config is not None and run is None and not os.environ.get("ZP_RUN"):
        from ._start import start
        return start(config, overrides, timeout_s, device, raw)
    run = run if run is not None else os.environ.get("ZP_RUN")
    if not run:
        raise ZeusPipeError("zeus_pipe.attach: no run: give attach(config=...) to start one, "
                            "attach(run=...), or start the program as trainer.command of "
                            "`zeus-pipe up`, which sets ZP_RUN")
    rank = int(rank if rank is not None else os.environ.get("ZP_RANK", "0"))
    return Client(run, rank, timeout_s, device, raw)
