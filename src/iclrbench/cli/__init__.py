"""``bench``: list, inspect, run and compare the suite's tasks and algorithms.

Every command that prints results takes ``--format json``. Bad input prints one line on stderr and exits
with code 2; nothing stored is changed. Ctrl-C during a sweep keeps every finished run (exit code 130).

The package: :mod:`~iclrbench.cli.parser` (arguments and help), :mod:`~iclrbench.cli.output` (what is
printed), :mod:`~iclrbench.cli.read` (the commands that only read), :mod:`~iclrbench.cli.run` (the
commands that compute and write the store) and :mod:`~iclrbench.cli.stores` (the stores a command opens).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Sequence

from iclrbench.cli.parser import parse_args
from iclrbench.cli.stores import close_stores
from iclrbench.core.errors import UserError
from iclrbench.core.interrupt import stop_on_signals

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

__all__ = ["EXIT_INTERRUPTED", "EXIT_USAGE", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``bench`` command line ``argv`` (default: ``sys.argv[1:]``) and return its exit code:
    0 done, 1 a run failed, 2 bad input (one line on stderr), 130 interrupted."""
    if sys.stdout is None:  # started with stdout closed (``bench list >&-``): nothing could be printed
        print("bench: error: stdout is closed; redirect it instead (> /dev/null)", file=sys.stderr)
        return EXIT_USAGE
    try:
        args = parse_args(argv)
        with stop_on_signals():
            return int(args.func(args))
    except UserError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help, --version: argparse exits; a return code keeps main() callable
        return exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        print("bench: interrupted; every finished run is stored", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except OSError as exc:  # stdout on a full disk or /dev/full; a file the system would not give us
        if exc.filename is not None:
            print(f"bench: error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        _silence_stdout()
        print(f"bench: error: cannot write the output ({exc.strerror or exc})", file=sys.stderr)
        return EXIT_USAGE
    finally:
        close_stores()


def _silence_stdout() -> None:
    """Point stdout at /dev/null: the interpreter flushes it again at exit, which would raise a second,
    unhandled error on the same broken or full output."""
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # not a real descriptor (tests capture stdout in memory)
