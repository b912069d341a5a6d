"""_cuda.py — attach(device="cuda"): a client's batches on a GPU.

The ring (the shared memory the batches lie in) is page-locked once, at the
first batch (cudaHostRegister through the CUDA runtime torch loaded;
zp_client_ring pins the mapping so it never changes), and unregistered at
close(). Each batch is copied with cudaMemcpyAsync on a side stream of its
own. When batch k is handed out and batch k+1 of the same epoch is already
in the ring, k+1 is taken at once (without waiting: Client._look_ahead) and
its copy issued, so it runs while the loop computes on batch k; otherwise
its copy is issued when the loop asks for it (still beside the GPU work the
loop queued for batch k). Never past an epoch's last batch: the epoch's end
is where ranks wait for each other, and it comes when the loop asks. The
current stream waits on the copy's event (nothing the loop queues next reads
the batch before it is there), and the host waits for that event only, never
for the loop's work: as soon as the copy is done the slot goes back to the
pipeline (not when the loop is done with the batch). x and y are then the
loop's own tensors, valid as long as it keeps them. uint8 batches are
normalised on the device with the run's dataset.mean/std
(zp_client_normalization), as the built-in trainer does: x is float32."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Tuple

import torch

from ._lib import U8, Batch, ZeusPipeError

if TYPE_CHECKING:
    from .client import Client

# A copy issued on the side stream: ((slot, generation), x, y, indices, its event)
_Copy = Tuple[Tuple[int, int], torch.Tensor, torch.Tensor, torch.Tensor, torch.cuda.Event]

_MAX_CHANNELS = 64


def check(device: str | torch.device) -> torch.device:
    """The torch.device that `device` names, or ZeusPipeError when it is no
    CUDA device this process can use. Called before anything is attached."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ZeusPipeError("zeus_pipe: attach(device=%r): %s" % (device, e))
    if dev.type != "cuda":
        raise ZeusPipeError("zeus_pipe: attach(device=%r): only a CUDA device ('cuda', "
                            "'cuda:N') is supported; leave device=None for CPU tensors (views "
                            "of the ring, no copy)" % (device,))
    if not torch.cuda.is_available():
        raise ZeusPipeError("zeus_pipe: attach(device=%r): torch %s has no CUDA here "
                            "(torch.cuda.is_available() is False: no GPU, no driver, or a "
                            "CPU-only torch); leave device=None for CPU tensors"
                            % (device, torch.__version__))
    count = torch.cuda.device_count()
    index = torch.cuda.current_device() if dev.index is None else dev.index
    if not 0 <= index < count:
        raise ZeusPipeError("zeus_pipe: attach(device=%r): no such GPU: this process sees %d "
                            "(CUDA_VISIBLE_DEVICES, or cuda:0 .. cuda:%d)"
                            % (device, count, count - 1))
    return torch.device("cuda", index)


def _cudart() -> ctypes.CDLL:
    """The CUDA runtime, through ctypes: the one torch mapped (seen in
    /proc/self/maps once CUDA is initialised), else the loader's."""
    names = []
    try:
        with open("/proc/self/maps") as f:
            names += sorted({l.split()[-1] for l in f if "libcudart" in l.rsplit("/", 1)[-1]})
    except OSError:
        pass
    names += ["libcudart.so", "libcudart.so.12", "libcudart.so.11.0"]
    tried = []
    for name in names:
        try:
            rt = ctypes.CDLL(name)
            rt.cudaHostRegister.restype = rt.cudaHostUnregister.restype = ctypes.c_int
        except (OSError, AttributeError) as e:
            tried.append("%s: %s" % (name, e))
            continue
        rt.cudaHostRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        rt.cudaHostUnregister.argtypes = [ctypes.c_void_p]
        rt.cudaGetErrorString.restype, rt.cudaGetErrorString.argtypes = ctypes.c_char_p, [ctypes.c_int]
        return rt
    raise ZeusPipeError("zeus_pipe: device='cuda': no CUDA runtime to page-lock the ring with; "
                        "tried " + "; ".join(tried))


class Device:
    """One client's GPU side: the side stream, the page-locked ring and the
    normalisation. Made by Client for attach(device=...); close() before the
    client detaches."""

    def __init__(self, client: Client, device: torch.device) -> None:
        self.device = device
        self._client = client
        self._stream = torch.cuda.Stream(device=device)
        self._rt: ctypes.CDLL | None = None
        self._pinned: int | None = None  # the ring's address, while it is page-locked
        self._ahead: _Copy | None = None  # the copy of the batch taken ahead
        self.indices = torch.empty(0, dtype=torch.int64)  # of the last batch, a CPU copy
        mean = (ctypes.c_float * _MAX_CHANNELS)()
        std = (ctypes.c_float * _MAX_CHANNELS)()
        n = client._check(client._lib.zp_client_normalization(client._c, mean, std,
                                                              _MAX_CHANNELS), "normalization")
        # a Python Dataset: the uint8 field dataset.python.normalize names, if any (C, ...)
        self._norm: str | None = None
        self._norm_dims: int | None = None
        for name, dtype, shape, _, _ in client.fields if client._records else ():
            if name == client.normalized and dtype == "uint8":
                self._norm = name
                self._norm_dims = len(shape)
        dims = 3 if self._norm_dims is None else self._norm_dims
        shape = (1, n) + (1,) * (max(dims, 1) - 1)
        self._mean = torch.tensor(mean[:n], dtype=torch.float32, device=device).view(shape)
        self._std = torch.tensor(std[:n], dtype=torch.float32, device=device).view(shape)

    def _pin(self) -> None:
        c = self._client
        base, size = ctypes.c_void_p(), ctypes.c_size_t()
        c._check(c._lib.zp_client_ring(c._c, ctypes.byref(base), ctypes.byref(size)), "ring")
        self._rt = self._rt or _cudart()
        with torch.cuda.device(self.device):
            err = self._rt.cudaHostRegister(base, size.value, 0)
        if err:
            raise ZeusPipeError("zeus_pipe: page-locking the ring (%d bytes at %#x) for %s: "
                                "cudaHostRegister: %s" % (size.value, base.value or 0, self.device,
                                                          self._rt.cudaGetErrorString(err).decode()))
        self._pinned = base.value

    def _copy(self, b: Batch) -> _Copy:
        """Issues batch b's copy on the side stream (no wait): its tensors,
        indices and the copy's event."""
        if self._pinned is None:
            self._pin()
        n, nbytes = b.n, b.n * b.sample_bytes
        u8 = b.dtype == U8 or self._client._records  # records travel as bytes
        hx = (torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(b.data),
                               dtype=torch.uint8 if u8 else torch.float32)
              if nbytes else torch.empty(0, dtype=torch.uint8 if u8 else torch.float32))
        hy = (torch.frombuffer((ctypes.c_int32 * n).from_address(b.labels), dtype=torch.int32)
              if n else torch.empty(0, dtype=torch.int32))
        indices = (torch.frombuffer((ctypes.c_uint32 * n).from_address(b.indices),
                                    dtype=torch.int32).to(torch.int64) & 0xFFFFFFFF
                   if n else torch.empty(0, dtype=torch.int64))
        with torch.cuda.stream(self._stream):
            x = hx.to(self.device, non_blocking=True)
            y = hy.to(self.device, non_blocking=True)
            copied = torch.cuda.Event()
            copied.record(self._stream)
        return (int(b.slot), int(b.gen)), x, y, indices, copied

    def start(self, b: Batch) -> None:
        """Starts the copy of batch b (taken ahead, not yet handed out) while
        the loop still computes on the one before."""
        self.cancel()
        self._ahead = self._copy(b)

    def cancel(self) -> None:
        """Forgets a copy started ahead, once it is done (before its slot goes
        back to the pipeline unread: a seek)."""
        if self._ahead:
            self._ahead[4].synchronize()
            self._ahead = None

    def tensors(self, b: Batch) -> Any:
        """Batch b (held by the client) as (x, y) on the device; its slot is
        released as soon as its copy is done."""
        c = self._client
        ahead, self._ahead = self._ahead, None
        if not ahead or ahead[0] != (int(b.slot), int(b.gen)):
            if ahead:
                ahead[4].synchronize()
            ahead = self._copy(b)
        _, x, y, self.indices, copied = ahead
        current = torch.cuda.current_stream(self.device)
        current.wait_event(copied)
        # made on the side stream, used on the current one: the allocator must
        # not hand their memory to the side stream's next copy before the
        # current stream is done with them (torch 1.13's stubs want a torch._C.Stream)
        x.record_stream(current)  # type: ignore[arg-type]
        y.record_stream(current)  # type: ignore[arg-type]
        copied.synchronize()  # the copy only: the loop's queued work goes on
        c._release()
        if c._records:  # every field, from the one copy of the records, made contiguous here
            fields = c.split_fields(x.view(b.n, b.sample_bytes), b.n)
            if isinstance(fields, dict):
                return {k: self._field(k, t) for k, t in fields.items()}
            return tuple(self._field(f[0], t) for f, t in zip(c.fields, fields))
        x = x.view(b.n, b.c, b.h, b.w)
        if b.dtype == U8 and not c._raw:
            x = (x.to(torch.float32) / 255 - self._mean) / self._std
        return x, y.to(torch.int64)

    def _field(self, name: str, t: torch.Tensor) -> torch.Tensor:
        """A field on the device: contiguous, and the normalised field as float32."""
        if name == self._norm and not self._client._raw:
            return (t.to(torch.float32) / 255 - self._mean) / self._std
        return t.contiguous()

    def close(self) -> None:
        """Unregisters the ring (after the side stream's copies). Safe twice."""
        self._ahead = None
        if self._pinned is not None and self._rt is not None:
            self._stream.synchronize()
            self._rt.cudaHostUnregister(ctypes.c_void_p(self._pinned))
            self._pinned = None
