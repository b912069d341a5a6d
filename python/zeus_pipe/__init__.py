"""zeus_pipe — a zeus-pipe run's batches in a PyTorch training loop, in place
of torch.utils.data.DataLoader (ctypes over libzeuspipe.so,
pipeline/include/zeus_pipe.h). The manual is docs/pytorch.md.

    import zeus_pipe
    with zeus_pipe.attach() as zp:      # $ZP_RUN, $ZP_RANK: set by `zeus-pipe up`
        for epoch in range(zp.epoch, EPOCHS):
            for x, y in zp.train:       # x: N,C,H,W float32; y: int64
                ...
            for x, y in zp.test:
                ...
            zp.log("test_epoch", epoch=epoch, accuracy=acc)

The modules: client.py (Client and Source: the order of the epochs, resume,
the lifetime of a batch, DDP), _start.py (attach(config=...): the script
starts the pipeline), _cuda.py (device="cuda"), _lib.py (the library through
ctypes), _seed.py (sample_seed), and for `dataset.source: python` runs
_loader_process.py, probe.py and _dataset.py (which need numpy; importing the package
loads neither numpy nor torch)."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Mapping

from ._lib import ZeusPipeError
from ._seed import sample_seed
from .client import Client, Source

# importable from zeus_pipe before the package had __all__; not its API
from ._lib import (BATCH, DTYPES, END, EPOCH_END, F32, IN_LABELS, ITEM_DICT,  # noqa: F401
                   PLAN_TEST, PLAN_TEST_FIRST, PLAN_TRAIN, TEST, TRAIN, Batch, Field, RunInfo,
                   load, strerror)

if TYPE_CHECKING:
    import torch

__all__ = ["attach", "Client", "Source", "ZeusPipeError", "sample_seed"]


def attach(run: str | os.PathLike[str] | None = None, rank: int | None = None,
           timeout_s: float = 60, device: str | torch.device | None = None,
           config: str | os.PathLike[str] | None = None,
           overrides: Mapping[str, object] | None = None, raw: bool = False) -> Client:
    """Attaches to rank `rank` of the run in folder `run` (defaults: $ZP_RUN,
    $ZP_RANK, else 0), waiting up to timeout_s for its ring. device: None
    (or "cpu") for CPU views of the ring, "cuda" or "cuda:N" for batches
    copied to that GPU. raw: uint8 samples as the pixels themselves, not
    normalised. Returns a Client; raises ZeusPipeError with the library's
    sentence when it cannot (also: a device without CUDA).

    With config (a YAML file; overrides: {"key": value}) and neither run nor
    $ZP_RUN, the script starts the pipeline itself (`python3 train.py`, or
    torchrun: local rank 0 starts it for WORLD_SIZE ranks, each attaches as
    its RANK) and stops it when it exits: see _start.py. Under `zeus-pipe up`
    ($ZP_RUN set) config and overrides are not read: the run has its own."""
    if config is not None and run is None and not os.environ.get("ZP_RUN"):
        from ._start import start
        return start(config, overrides, timeout_s, device, raw)
    found = run if run is not None else os.environ.get("ZP_RUN")
    if not found:
        raise ZeusPipeError("zeus_pipe.attach: no run: give attach(config=...) to start one, "
                            "attach(run=...), or start the program as trainer.command of "
                            "`zeus-pipe up`, which sets ZP_RUN")
    return Client(found, int(rank if rank is not None else os.environ.get("ZP_RANK", "0")),
                  timeout_s, device, raw)
