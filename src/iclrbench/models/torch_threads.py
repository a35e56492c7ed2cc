"""One torch thread for the duration of a block.

The suite's torch workloads are many small tensors: one thread is the fastest, and parallel runs
(``-j N``, one process each) then do not oversubscribe the cores. The previous setting is restored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def one_torch_thread() -> Iterator[None]:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
