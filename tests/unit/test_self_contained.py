"""The project explains itself: no file of it refers to a document outside it.

Design notes live in `docs/`; a pointer to a specification kept elsewhere (a path above the project,
or a numbered section of such a document) would leave a reader of a fresh clone with nothing to open.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = {".git", ".venv", "node_modules", "cdk.out", "mutants", ".mypy_cache", ".ruff_cache", ".hypothesis"}
SUFFIXES = {".py", ".md", ".toml", ".json", ".txt", ".cfg", ".yaml", ".yml", ".sh", ""}
# Written in pieces so that this file does not match itself.
OUTSIDE = re.compile("|".join([r"\.\./" + "shared", "SPEC" + r"\.md", "SPEC" + r" section", "SPEC" + r" \d"]))


def project_files() -> list[Path]:
    return [
        path
        for path in ROOT.rglob("*")
        if path.is_file()
        and path.suffix in SUFFIXES
        and not SKIPPED.intersection(path.relative_to(ROOT).parts)
        and "__pycache__" not in path.parts
        and not any(part.endswith(".egg-info") for part in path.parts)
    ]


def test_no_file_refers_outside_the_project() -> None:
    offenders = []
    for path in project_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        offenders += [
            f"{path.relative_to(ROOT)}:{number}"
            for number, line in enumerate(text.splitlines(), 1)
            if OUTSIDE.search(line)
        ]
    assert offenders == []


def test_the_check_sees_such_a_reference(tmp_path: Path) -> None:
    assert OUTSIDE.search("The specification is " + "../" + "shared/" + "SPEC" + ".md")
    assert OUTSIDE.search("see " + "SPEC" + " 7")
    assert not OUTSIDE.search("DEMO_SPEC = 1; the spec says")
