"""``bench``: list, inspect, run and compare the suite's tasks and algorithms.

Every command that prints results takes ``--format json``. Bad input prints one line on stderr and exits
with code 2; nothing stored is changed. Ctrl-C during a sweep keeps every finished run (exit code 130).

The package: :mod:`~iclrbench.cli.parser` (arguments and help), :mod:`~iclrbench.cli.output` (what is
printed), :mod:`~iclrbench.cli.read` (the commands that only read), :mod:`~iclrbench.cli.run` (the
commands that compute and write the store) and :mod:`~iclrbench.cli.stores` (the stores a command opens).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from iclrbench.cli.parser import parse_args
from iclrbench.cli.stores import close_stores
from iclrbench.core.errors import UserError
from iclrbench.core.interrupt import stop_on_sigint

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

__all__ = ["EXIT_INTERRUPTED", "EXIT_USAGE", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``bench`` command line ``argv`` (default: ``sys.argv[1:]``) and return its exit code:
    0 done, 1 a run failed, 2 bad input (one line on stderr), 130 interrupted."""
    try:
        args = parse_args(argv)
        with stop_on_sigint():
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
        return 0
    finally:
        close_stores()
