"""Reading a spec file as a hostile one would be written: a regular file, bounded, strict, shallow.

`gco.inputs.input_files` reads it (only a regular file: a FIFO or `/dev/zero` is refused, not waited on
or slurped; at most `MAX_SPEC_FILE_BYTES`; UTF-8), `gco.inputs.strict_json` parses a `.json` file and
`gco.inputs.strict_yaml` any other, by the YAML 1.2 core schema (`replicas: 1:30` is a string, so the
spec refuses it as the flag would be; `010` is refused). Both refuse a key given twice, nesting
deeper than `MAX_DEPTH` and, in YAML, anchors and aliases.

Every refusal is one `InvalidSpecError` on the field `--spec`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gco.endpoints.errors import InvalidSpecError
from gco.errors import GcoInputError
from gco.inputs import input_files
from gco.inputs.strict_json import MAX_DEPTH as MAX_DEPTH  # noqa: PLC0414 (re-exported: the tests' limit)

MAX_SPEC_FILE_BYTES = 256 * 1024
FIELD = "--spec"


def load_spec_file(path: Path, field: str = FIELD) -> dict[str, Any]:
    """Read a whole spec (or another mapping, such as the matrix settings) from JSON or YAML.

    Parameters:
        path: the file (`.json` is JSON, any other name YAML).
        field: what a refusal names.

    Returns:
        The file's mapping.

    Raises:
        InvalidSpecError: not a regular file, unreadable, too large, unparsable, a duplicate key,
            too deep, a value YAML 1.1 and 1.2 read differently, or not a mapping (field `field`).
    """
    try:
        data = input_files.load_document(path, field, MAX_SPEC_FILE_BYTES)
    except GcoInputError as error:
        raise InvalidSpecError(field, error.message) from None
    if not isinstance(data, dict):
        raise InvalidSpecError(field, f"{input_files.shown(path)} must hold a mapping of spec fields")
    return data
