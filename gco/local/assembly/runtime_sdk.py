"""What the Lambda Python runtime provides beside a function's code, as the local stack stands it in.

Lambda's Python runtimes put the function's code (`/var/task`) first on the path, then the layers,
then the runtime's own site-packages holding the AWS SDK (boto3, botocore and their dependencies:
"Lambda runtimes", the Python runtime's included SDK). `runtime_sdk` copies those pure-Python
packages from this environment into a folder that stands in for the runtime's site-packages: the
versions are this environment's, not the runtime's (a version the bundle relies on but Lambda's SDK
lacks is not caught here; the bundles lock nothing of the SDK for that reason: stacks.bundling).
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

# The runtime's SDK and its dependencies, by distribution name -> import name (the distributions are
# stacks.bundling.RUNTIME_PROVIDED, which the bundles never install).
SDK_MODULES = {"boto3": "boto3", "botocore": "botocore", "s3transfer": "s3transfer", "urllib3": "urllib3",
               "python-dateutil": "dateutil", "six": "six"}  # fmt: skip
# The runtime ships botocore with its own dependency jmespath too; gco's bundles carry their copy (the
# locks resolve it for Powertools), CDK's own Python functions (the kubectl provider's) rely on the runtime's.
ALSO_IN_RUNTIME = {"jmespath": "jmespath"}


def runtime_sdk(out: Path) -> Path:
    """A folder standing in for the runtime's own packages (the AWS SDK and its dependencies), made
    once: a folder that has them already is reused."""
    out.mkdir(parents=True, exist_ok=True)
    for name in (*SDK_MODULES.values(), *ALSO_IN_RUNTIME.values()):
        source = Path(importlib.import_module(name).__file__ or "")
        if source.name == "__init__.py":
            if not (out / name).exists():
                shutil.copytree(source.parent, out / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif not (out / source.name).exists():
            shutil.copy2(source, out / source.name)
    return out
