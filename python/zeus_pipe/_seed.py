"""_seed.py — the seed of one sample, as the loaders of a `dataset.source:
python` run seed each __getitem__ with: a 63-bit number of (run seed, split,
epoch, index). Stdlib only, so that `import zeus_pipe` loads neither numpy
nor torch; _dataset.seed_all seeds the generators with it and records it
here for sample_seed()."""
from __future__ import annotations

import hashlib
import operator

_SPLIT_CODE = {"train": 0, "test": 1}
_current = [0]  # the seed of the sample being loaded (set by _dataset.seed_all)


def sample_seed(seed: int | None = None, split: int | str | None = None,
                epoch: int | None = None, index: int | None = None) -> int:
    """The seed of one sample: a 63-bit number of (run seed, split, epoch,
    index); split is 0 or "train", 1 or "test". Without arguments, inside a
    loader's __getitem__: the seed of the sample being loaded (the one
    Python's random, NumPy's global generator and torch were seeded with),
    for a Dataset that keeps generators of its own."""
    if seed is None:
        return _current[0]
    if split is None or epoch is None or index is None:
        raise TypeError("zeus_pipe.sample_seed: give seed, split, epoch and index, or none of "
                        "them (inside __getitem__: the sample being loaded)")
    bad = "zeus_pipe.sample_seed: split %r: 0 or 'train', 1 or 'test'" % (split,)
    if isinstance(split, str):
        if split not in _SPLIT_CODE:
            raise ValueError(bad)
        code = _SPLIT_CODE[split]
    else:
        try:
            code = operator.index(split)  # an int, or numpy's and torch's integers
        except TypeError:
            raise ValueError(bad) from None
    h = hashlib.blake2b(b"%d/%d/%d/%d" % (seed, code, epoch, index), digest_size=8).digest()
    return int.from_bytes(h, "little") >> 1
