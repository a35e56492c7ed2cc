"""The one exception type that the CLI turns into a single line on stderr and exit code 2."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the person at the keyboard: an unknown name, a malformed value, an unusable file.

    The message is one line that says what is wrong and, where it helps, what would be right.
    """
