"""A Lambda bundle's unzipped size, measured when it is built and held under a limit.

Lambda refuses a function whose code and layers unzip to more than 250 MB (`CODE_SIZE_UNZIPPED_LIMIT`,
Lambda quotas: docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html), and fetches and
unpacks the whole package on every cold start. A bundle over `BUNDLE_SIZE_LIMIT` (200 MiB, leaving
room for a layer such as Lambda Insights') fails the synth with its largest packages named, so a
dependency that grew is found at synth, not at `cdk deploy`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MIB = 1024 * 1024
# Lambda counts its quotas in MiB: "250 MB" is the 262,144,000 bytes GetAccountSettings reports.
CODE_SIZE_UNZIPPED_LIMIT = 250 * MIB
BUNDLE_SIZE_LIMIT = 200 * MIB
SHOWN = 5  # the largest packages a refusal names


class BundleTooLargeError(ValueError):
    """A bundle unzips to more than BUNDLE_SIZE_LIMIT; the message names its largest packages."""


@dataclass(frozen=True)
class BundleSize:
    """What a bundle unzips to: bytes and files in all, and bytes per top-level entry (a package, a
    module, a wheel's `.dist-info` counted with its package)."""

    name: str
    total: int
    files: int
    by_package: dict[str, int]

    def largest(self, count: int = SHOWN) -> list[tuple[str, int]]:
        return sorted(self.by_package.items(), key=lambda item: (-item[1], item[0]))[:count]

    def line(self) -> str:
        """One line for the synth's output: the bundle, its size, its three largest packages."""
        parts = ", ".join(f"{package} {size / MIB:.1f}" for package, size in self.largest(3))
        return f"gco bundling: {self.name}: {self.total / MIB:.1f} MiB unzipped, {self.files} files ({parts})"


def _package(entry: str) -> str:
    """The package a top-level entry belongs to: `numpy-2.2.0.dist-info` and `numpy.libs` -> `numpy`."""
    for suffix in (".dist-info", ".libs", ".data"):
        if entry.endswith(suffix):
            return entry[: -len(suffix)].split("-", 1)[0].lower()
    return entry.removesuffix(".py").lower()


def measure(name: str, directory: Path) -> BundleSize:
    """The unzipped size of the bundle in `directory`: every file's bytes, as its zip holds them (a
    zip has no hard links: a file linked twice is stored twice)."""
    by_package: dict[str, int] = {}
    total = files = 0
    for root, _, names in os.walk(directory):
        for file in names:
            status = os.lstat(os.path.join(root, file))
            top = Path(root, file).relative_to(directory).parts[0]
            by_package[_package(top)] = by_package.get(_package(top), 0) + status.st_size
            total += status.st_size
            files += 1
    return BundleSize(name, total, files, by_package)


def check(size: BundleSize, limit: int = BUNDLE_SIZE_LIMIT) -> None:
    """Refuse a bundle over `limit`.

    Raises:
        BundleTooLargeError: naming the bundle, its size and its largest packages.
    """
    if size.total <= limit:
        return
    largest = ", ".join(f"{package} ({bytes_ / MIB:.1f} MiB)" for package, bytes_ in size.largest())
    raise BundleTooLargeError(
        f"the {size.name} Lambda bundle unzips to {size.total / MIB:.1f} MiB, over gco's limit of "
        f"{limit / MIB:.0f} MiB (Lambda's is {CODE_SIZE_UNZIPPED_LIMIT / MIB:.0f} MiB with layers); "
        f"largest: {largest}"
    )
