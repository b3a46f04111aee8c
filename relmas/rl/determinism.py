"""Torch run as every learner of relmas needs it: one thread and deterministic kernels.

Torch's default is one thread per core, so a learner fitted on a machine with more cores sums
in another order and ends with other weights, and a job that Snakemake gave one core spreads
over the others. With one thread, the same inputs give the same weights on any core count
(of the same instruction set).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def deterministic_torch() -> Iterator[None]:
    """One thread and deterministic kernels inside; the caller's settings are restored."""
    threads = torch.get_num_threads()
    deterministic = torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)
