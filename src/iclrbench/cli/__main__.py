"""``python -m iclrbench.cli``: the ``bench`` command without the console script."""

import sys

from iclrbench.cli import main

sys.exit(main())
