"""The code-shape figures (tests/tools/code_shape.py) on a small tree of known shape."""

from __future__ import annotations

from pathlib import Path

from tests.tools.code_shape import measure, percentile, summary


def test_measure_counts_files_lengths_and_public_docstrings(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text('"""The package."""\n')
    source = """\"\"\"Module a.\"\"\"


def f():
    \"\"\"F.\"\"\"
    return 1


def g():
    x = 1
    return x


def _h():
    pass


class C:
    def method(self):
        return 2

    def __repr__(self):
        return 'C'
"""
    (package / "a.py").write_text(source)
    (package / "_private.py").write_text("def k():\n    pass\n")
    shape = measure(sorted(package.rglob("*.py")), tmp_path)
    assert shape.files_per_package == {"pkg": 3}
    assert sorted(shape.function_lengths) == [2, 2, 2, 2, 3, 3]
    # public: the package, module a, f, g, C, C.method (the private module, _h and __repr__ are not)
    assert (shape.documented, shape.public) == (3, 6)
    figures = summary(shape)
    assert figures["function_lines"] == {"median": 2.0, "p90": 3, "max": 3}
    assert figures["largest_files"] == {"pkg/a.py": 23, "pkg/_private.py": 2, "pkg/__init__.py": 1}


def test_percentile_is_nearest_rank() -> None:
    assert percentile(list(range(1, 11)), 0.9) == 9
    assert percentile([5], 0.9) == 5
