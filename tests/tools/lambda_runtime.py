"""What the Lambda Python runtime provides beside a function's code, for tests that run a bundle.

Lambda's Python runtimes put the function's code (`/var/task`) first on the path, then the layers,
then the runtime's own site-packages holding the AWS SDK (boto3, botocore and their dependencies:
"Lambda runtimes", the Python runtime's included SDK). `runtime_sdk` copies those pure-Python
packages from this environment into a folder that stands in for the runtime's site-packages.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gco.local.assembly.runtime_sdk import SDK_MODULES
from gco.local.assembly.runtime_sdk import runtime_sdk as local_runtime_sdk
from stacks.bundling import (
    ROOT,
    RUNTIME_PROVIDED,
    Bundle,
    LocalPythonBundling,
    finish_wheels,
    pinned_versions,
)


def runtime_sdk(out: Path) -> Path:
    """A folder standing in for the runtime's own packages (gco.local.assembly.runtime_sdk), checked to
    hold exactly what the bundles leave to the runtime."""
    assert set(SDK_MODULES) == RUNTIME_PROVIDED
    return local_runtime_sdk(out)


def bundle_for_this_python(kind: Bundle, out: Path) -> Path:
    """`kind`'s bundle built for this interpreter: handlers and gco by LocalPythonBundling, then exactly
    its lock's versions as this Python's wheels (the lock's hashes are those of the runtime's wheels),
    finished as the product finishes its own."""
    assert LocalPythonBundling(bundle=kind, install_dependencies=False).try_bundle(str(out), image=None)  # type: ignore[arg-type]
    pins = out.parent / f"{out.name}-pins.txt"
    pins.write_text(pinned_versions(ROOT / kind.lock))
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--target", str(out)),
            *("--only-binary=:all:", "--no-deps", "-r", str(pins)),
        ],
        check=True,
    )
    finish_wheels(out)  # as the product's bundling does after its own pip run
    return out
