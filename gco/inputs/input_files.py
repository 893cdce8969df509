"""Reading a file a user names, as a hostile one would be named: regular files only, bounded, strict.

- Only a regular file is read. The file is opened without blocking (`O_NONBLOCK`: opening a FIFO
  for reading would otherwise wait for a writer forever) and checked with `fstat` on the open
  descriptor (no race with a rename): a FIFO, a device (`/dev/zero`), a socket or a directory is
  refused with one line naming what it is.
- At most `max_bytes` are read; a larger file is refused, not slurped.
- The text must be UTF-8; JSON (`.json`) is parsed by `gco.inputs.strict_json`, anything else as YAML by
  `gco.inputs.strict_yaml` (the YAML 1.2 core schema).

Every refusal is one `GcoInputError` on the field the caller names (`--spec`, `SETTINGS`,
`--manifest`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from gco.errors import GcoInputError
from gco.inputs import strict_json, strict_yaml

# The most a data file (a prompt or clip set) may hold: far above any benchmark's, below a
# machine's memory.
MAX_DATA_FILE_BYTES = 256 * 1024 * 1024

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def shown(path: Path | str) -> str:
    """The path for a one-line message, escaped when it holds control characters."""
    text = str(path)
    return text if text.isprintable() else repr(text)


def not_regular(mode: int) -> str | None:
    """What a file of `mode` is when it is not a regular file ("a FIFO"), else None."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def read_bounded(path: Path, field: str, max_bytes: int) -> str:
    """The text of the regular file `path`, refusing anything else or more than `max_bytes`.

    Parameters:
        path: the file.
        field: what every refusal names.
        max_bytes: the most bytes the file may hold.

    Returns:
        The file's text.

    Raises:
        GcoInputError: the file cannot be opened, is not a regular file, holds more than
            `max_bytes`, or is not UTF-8.
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as error:
        raise GcoInputError(field, f"cannot read {shown(path)}: {error.strerror or error}") from None
    except ValueError as error:  # a NUL byte in the path
        raise GcoInputError(field, f"cannot read {shown(path)}: {error}") from None
    kind = not_regular(os.fstat(descriptor).st_mode)
    if kind is not None:
        os.close(descriptor)
        raise GcoInputError(field, f"{shown(path)} is {kind}, not a regular file")
    with os.fdopen(descriptor, "rb") as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as error:
            raise GcoInputError(field, f"cannot read {shown(path)}: {error.strerror or error}") from None
    if len(data) > max_bytes:
        raise GcoInputError(field, f"{shown(path)} is larger than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise GcoInputError(field, f"cannot read {shown(path)}: not UTF-8 ({error.reason})") from None


def load_document(path: Path, field: str, max_bytes: int) -> Any:
    """A JSON (`.json`) or YAML (any other name) file's value, read by `read_bounded`.

    Returns:
        The parsed value (not checked to be a mapping).

    Raises:
        GcoInputError: as `read_bounded`, `strict_json.loads` or `strict_yaml.loads` refuse it.
    """
    text = read_bounded(path, field, max_bytes)
    if path.suffix.lower() == ".json":
        return strict_json.loads(text, field, shown(path))
    return strict_yaml.loads(text, field, shown(path))
