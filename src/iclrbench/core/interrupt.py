"""Ctrl-C that always stops a sweep.

Python raises KeyboardInterrupt wherever the main thread happens to be; raised inside a ``__del__`` or a
generator's clean-up, it is printed and swallowed, and the sweep would go on. The CLI's SIGINT handler
therefore also sets :data:`STOP`, which the runner checks after every stored result.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP = threading.Event()


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    STOP.set()
    raise KeyboardInterrupt


@contextmanager
def stop_on_sigint() -> Iterator[None]:
    """Within the block, SIGINT sets STOP and raises KeyboardInterrupt (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    STOP.clear()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        STOP.clear()


def check() -> None:
    """Raise KeyboardInterrupt if a stop was requested (a swallowed Ctrl-C)."""
    if STOP.is_set():
        raise KeyboardInterrupt
