"""The one exception type for bad user input.

Every user-facing failure (bad config, bad spec, bad Parquet) is raised as an `InputError` so that
the command line can print it as a single line naming the file, the key and what was expected, and
exit with status 2.
"""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad user input: `file: key: expected ..., got ...` on one line."""

    def __init__(self, file: str | Path | None, key: str | None, expected: str, got: object = None):
        self.file = str(file) if file is not None else None
        self.key = key
        self.expected = expected
        self.got = got
        parts = [p for p in (self.file, key) if p]
        where = ": ".join(parts)
        message = f"expected {expected}"
        if got is not None:
            message += f", got {_short(got)}"
        text = f"{where}: {message}" if where else message
        super().__init__(" ".join(text.split()))


def _short(value: object, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
