"""A CPython of a given X.Y on this machine: the Lambda functions' Python, which the bundling compiles
their bytecode with (stacks/bundling.py) and the local stack runs their assets on (gco.local.assembly).

Looked for as this interpreter, `$GCO_BUNDLE_PYTHON`, `pythonX.Y` on the PATH (unless it is a pyenv
shim), then a pyenv install (`$PYENV_ROOT`, default ~/.pyenv), each asked its implementation and version.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# An interpreter of the functions' Python to use when this one is another.
BUNDLE_PYTHON_ENV = "GCO_BUNDLE_PYTHON"
# The X.Y of the Lambda runtime the bundled functions run on (stacks/bundling.py's `RUNTIME`, which
# gco cannot import: tests/cdk/test_bundling.py holds the two equal).
FUNCTIONS_PYTHON = "3.13"


def this_python() -> str:
    """This interpreter's `X.Y`."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def find_cpython(version: str) -> str | None:
    """A CPython `version` ("3.13") on this machine, or None."""
    if sys.implementation.name == "cpython" and this_python() == version:
        return sys.executable
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    on_path = shutil.which(f"python{version}")
    # A pyenv shim on the PATH starts bash and pyenv (a tenth of a second, to fail where that version
    # is not selected) only to run one of the installs looked for next; the local stack looks the
    # functions' Python up on every start (gco.local.assembly.synth), and runs each function with it.
    if on_path and Path(on_path).parent == pyenv / "shims":
        on_path = None
    candidates = [
        os.environ.get(BUNDLE_PYTHON_ENV),
        on_path,
        *(
            str(path)
            for path in sorted(pyenv.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)
        ),
    ]
    for candidate in candidates:
        if candidate and _is_cpython(candidate, version):
            return candidate
    return None


def _is_cpython(interpreter: str, version: str) -> bool:
    try:
        answer = subprocess.run(
            [interpreter, "-c", "import sys; print(sys.implementation.name, '%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return answer.returncode == 0 and answer.stdout.split() == ["cpython", version]
