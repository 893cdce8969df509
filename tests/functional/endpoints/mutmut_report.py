"""Summarise `mutmut results --all true`: the score, and each survivor with its diff.

`make mutation` runs it after mutmut. A survivor listed in docs/fencing.md (by its mutant
name) is reported as equivalent; any other survivor fails the target.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def main(results: str) -> int:
    statuses: dict[str, str] = {}
    for line in Path(results).read_text(encoding="utf-8").splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name:
            statuses[name] = status.strip()
    counts = Counter(statuses.values())
    killed = counts["killed"] + counts["timeout"] + counts["segfault"]
    scored = killed + counts["survived"]
    score = 100.0 * killed / scored if scored else 0.0
    print(f"mutants: {len(statuses)}; killed {killed}, survived {counts['survived']}; score {score:.1f}%")
    print("by status: " + ", ".join(f"{status} {count}" for status, count in sorted(counts.items())))
    docs = (ROOT / "docs" / "fencing.md").read_text(encoding="utf-8")
    unexplained = []
    for name, status in sorted(statuses.items()):
        if status != "survived":
            continue
        equivalent = f"`{name}`" in docs
        print(f"survived  {name}  {'equivalent (docs/fencing.md)' if equivalent else 'UNEXPLAINED'}")
        diff = subprocess.run(
            [sys.executable, "-m", "mutmut", "show", name],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        print("\n".join("    " + line for line in diff.stdout.splitlines()))
        if not equivalent:
            unexplained.append(name)
    return 1 if unexplained or not scored else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
