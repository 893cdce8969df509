"""What each Lambda bundle weighs, unzipped and zipped, against Lambda's quota and the other bundle.

Builds each of `stacks.bundling.BUNDLES` as a synth with `--bundle-dependencies` does (the lock's wheels
for the functions' runtime and architecture, bytecode where the machine has the functions' Python),
into a scratch bundle cache, then sums its files' sizes (what Lambda unpacks, and holds to
`CODE_SIZE_UNZIPPED_LIMIT`) and zips it as `cdk deploy` uploads an asset directory (deflated). Lambda
fetches and unpacks a function's whole package on each cold start, so the Regional functions' package
(the stream and sweep handlers, and the authorizer on a request's path) is printed as a ratio of the
rollout's, which carries numpy and scipy for the rollout step's statistics.

    .venv/bin/python benchmarks/bundle_size.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from stacks.bundle_size import CODE_SIZE_UNZIPPED_LIMIT  # noqa: E402
from stacks.bundling import (  # noqa: E402
    BUNDLE_CACHE_ENV,
    BUNDLES,
    REGIONAL,
    ROLLOUT,
    Bundle,
    LocalPythonBundling,
)


def unzipped_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def zipped_bytes(folder: Path, archive: Path) -> int:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                out.write(path, path.relative_to(folder))
    return archive.stat().st_size


def measure(bundle: Bundle, scratch: Path) -> tuple[int, int]:
    folder = scratch / bundle.name
    folder.mkdir()
    assert LocalPythonBundling(bundle=bundle, install_dependencies=True).try_bundle(str(folder), image=None)  # type: ignore[arg-type]
    return unzipped_bytes(folder), zipped_bytes(folder, scratch / f"{bundle.name}.zip")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="gco-bundle-size-") as scratch:
        os.environ[BUNDLE_CACHE_ENV] = str(Path(scratch) / "cache")
        sizes = {bundle.name: measure(bundle, Path(scratch)) for bundle in BUNDLES}
    for bundle in BUNDLES:
        unzipped, zipped = sizes[bundle.name]
        print(
            f"{bundle.name:9s} {', '.join(bundle.handlers)}: {unzipped / 1e6:6.1f} MB unzipped "
            f"({unzipped / CODE_SIZE_UNZIPPED_LIMIT:.0%} of Lambda's {CODE_SIZE_UNZIPPED_LIMIT:,} bytes), "
            f"{zipped / 1e6:5.1f} MB zipped"
        )
    regional, rollout = sizes[REGIONAL.name], sizes[ROLLOUT.name]
    unzipped_ratio, zipped_ratio = regional[0] / rollout[0], regional[1] / rollout[1]
    print(f"regional / rollout: {unzipped_ratio:.3f}x unzipped, {zipped_ratio:.3f}x zipped")


if __name__ == "__main__":
    main()
