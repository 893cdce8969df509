"""What the Lambda Python runtime provides beside a function's code, for tests that run a bundle.

Lambda's Python runtimes put the function's code (`/var/task`) first on the path, then the layers,
then the runtime's own site-packages holding the AWS SDK (boto3, botocore and their dependencies:
"Lambda runtimes", the Python runtime's included SDK). `runtime_sdk` copies those pure-Python
packages from this environment into a folder that stands in for the runtime's site-packages.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path

from stacks.bundling import (
    ROOT,
    RUNTIME_PROVIDED,
    Bundle,
    LocalPythonBundling,
    finish_wheels,
    pinned_versions,
)

# The import names of the runtime's SDK and its dependencies (stacks.bundling.RUNTIME_PROVIDED).
SDK_MODULES = {"boto3": "boto3", "botocore": "botocore", "s3transfer": "s3transfer", "urllib3": "urllib3",
               "python-dateutil": "dateutil", "six": "six"}  # fmt: skip
# The runtime ships botocore with its own dependency jmespath too; gco's bundles carry their copy (the
# locks resolve it for Powertools), CDK's own Python functions (the kubectl provider's) rely on the runtime's.
ALSO_IN_RUNTIME = {"jmespath": "jmespath"}


def runtime_sdk(out: Path) -> Path:
    """A folder standing in for the runtime's own packages (the AWS SDK and its dependencies)."""
    assert set(SDK_MODULES) == RUNTIME_PROVIDED
    out.mkdir(parents=True, exist_ok=True)
    for name in (*SDK_MODULES.values(), *ALSO_IN_RUNTIME.values()):
        source = Path(importlib.import_module(name).__file__ or "")
        if source.name == "__init__.py":
            shutil.copytree(source.parent, out / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, out / source.name)
    return out


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
