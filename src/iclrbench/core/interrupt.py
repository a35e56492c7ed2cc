"""Ctrl-C (and SIGTERM, SIGHUP) that always stops a sweep, cleanly.

Python raises KeyboardInterrupt wherever the main thread happens to be; raised inside a ``__del__`` or a
generator's clean-up, it is printed and swallowed, and the sweep would go on. The CLI's handler therefore
also sets :data:`STOP`, which the runner checks after every stored result. SIGTERM (a scheduler's
pre-emption, ``kill``) and SIGHUP (a closed terminal) stop it the same way, so the worker pool is shut down
and its semaphores released instead of being left for the resource tracker to find.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP = threading.Event()


#: the signals that stop a sweep as Ctrl-C does
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    STOP.set()
    raise KeyboardInterrupt


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGINT, SIGTERM and SIGHUP set STOP and raise KeyboardInterrupt (main thread
    only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _on_signal) for s in STOP_SIGNALS}
    STOP.clear()
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        STOP.clear()


def check() -> None:
    """Raise KeyboardInterrupt if a stop was requested (a swallowed Ctrl-C)."""
    if STOP.is_set():
        raise KeyboardInterrupt
