"""Checks of the deploying machine: Node.js, the pinned CDK CLI, and Docker (or a prebuilt runner
image). They need no AWS credentials.

A command is run through `ToolRunner` (the real one: `subprocess_runner`), so the checks are tested
on recorded command outputs. Why each tool: the CDK app's jsii runtime and the CDK CLI run on
Node.js, 22 or newer (jsii's own start-up notice: "Node 20 is end-of-life and not supported anymore
by this software since 2026-10-30 ... supported node releases are ^24.0.0, ^22.0.0"); the runner stack
builds its container image with the local Docker daemon during `cdk deploy` unless `runner.image_uri`
names a prebuilt image; an arm64 machine builds that linux/amd64 image only through buildx.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from gco.doctor.model import LOCAL, Check, fail, ok

# (exit status, stdout); a missing program is exit status 127, as a shell reports it.
ToolRunner = Callable[[list[str], Path], tuple[int, str]]
NODE_MAJOR = 22
TOOL_TIMEOUT_SECONDS = 60
NOT_FOUND = 127


def subprocess_runner(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Run `argv` in `cwd` with a timeout; (127, "") when the program is not installed."""
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_SECONDS, check=False
        )
    except FileNotFoundError:
        return NOT_FOUND, ""
    except subprocess.TimeoutExpired:
        return 124, ""
    return done.returncode, done.stdout.strip()


def node_check(run: ToolRunner, root: Path) -> Check:
    code, out = run(["node", "--version"], root)
    found = re.match(r"v(\d+)\.", out)
    if code != 0 or not found:
        return fail("node", LOCAL, "Node.js not found", f"install Node.js {NODE_MAJOR} or newer")
    if int(found.group(1)) < NODE_MAJOR:
        return fail("node", LOCAL, f"Node.js {out} is too old", f"install Node.js {NODE_MAJOR} or newer")
    return ok("node", LOCAL, f"Node.js {out}")


def pinned_cdk_version(root: Path) -> str | None:
    """The CDK CLI version `package.json` pins (None without one)."""
    try:
        manifest = json.loads((root / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = manifest.get("devDependencies", {}).get("aws-cdk")
    return str(version) if version else None


def cdk_check(run: ToolRunner, root: Path) -> Check:
    pinned = pinned_cdk_version(root)
    code, out = run(["npx", "--no-install", "cdk", "--version"], root)
    found = out.split(" ", 1)[0] if code == 0 and out else ""
    if not found:
        return fail(
            "cdk-cli", LOCAL, "the CDK CLI is not installed in this checkout", "npm ci --no-audit --no-fund"
        )
    if pinned and found != pinned:
        return fail(
            "cdk-cli", LOCAL, f"CDK CLI {found}, package.json pins {pinned}", "npm ci --no-audit --no-fund"
        )
    return ok("cdk-cli", LOCAL, f"CDK CLI {found}")


def docker_check(
    run: ToolRunner, root: Path, *, prebuilt_image: str | None, machine: str | None = None
) -> Check:
    if prebuilt_image:
        return ok("docker", LOCAL, f"not needed: the runner uses the prebuilt image {prebuilt_image}")
    fix = "start Docker (the runner stack builds its image locally), or set runner.image_uri in cdk.json"
    code, out = run(["docker", "info", "--format", "{{.ServerVersion}}"], root)
    if code != 0:
        return fail("docker", LOCAL, "no Docker daemon answers", fix)
    if (machine or platform.machine()).lower() in ("arm64", "aarch64"):
        buildx, _ = run(["docker", "buildx", "version"], root)
        if buildx != 0:
            return fail(
                "docker",
                LOCAL,
                "an arm64 machine builds the linux/amd64 runner image only with buildx",
                "install the buildx plugin and amd64 emulation (binfmt), or set runner.image_uri",
            )
    return ok("docker", LOCAL, f"Docker {out}")


def local_checks(run: ToolRunner, root: Path, *, prebuilt_image: str | None) -> list[Check]:
    """Node.js, the CDK CLI, Docker."""
    return [
        node_check(run, root),
        cdk_check(run, root),
        docker_check(run, root, prebuilt_image=prebuilt_image),
    ]
