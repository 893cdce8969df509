"""The local checks on recorded command outputs: each tool present, missing, or the wrong version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gco.doctor.local import NOT_FOUND, cdk_check, docker_check, local_checks, node_check, subprocess_runner

IMAGE = "111122223333.dkr.ecr.us-east-1.amazonaws.com/gco-runner@sha256:" + "a" * 64


class Tools:
    """Stand-in for running commands: each program's (exit status, stdout) as a shell would give it;
    a program not listed is not installed (127). It does not model timeouts or stderr."""

    def __init__(self, **answers: tuple[int, str]) -> None:
        self.answers = answers
        self.ran: list[list[str]] = []

    def __call__(self, argv: list[str], cwd: Path) -> tuple[int, str]:
        self.ran.append(argv)
        key = "_".join(argv[:2]) if argv[:2] == ["docker", "buildx"] else argv[0]
        return self.answers.get(key, (NOT_FOUND, ""))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "package.json").write_text(json.dumps({"devDependencies": {"aws-cdk": "2.1148.1"}}))
    return tmp_path


def test_everything_installed_passes(root: Path) -> None:
    tools = Tools(node=(0, "v22.3.0"), npx=(0, "2.1148.1 (build 1a2b3c)"), docker=(0, "28.2.2"))
    checks = local_checks(tools, root, prebuilt_image=None)
    assert [(c.name, c.status) for c in checks] == [("node", "ok"), ("cdk-cli", "ok"), ("docker", "ok")]


@pytest.mark.parametrize(
    ("answers", "detail"),
    [({}, "Node.js not found"), ({"node": (0, "v20.20.2")}, "Node.js v20.20.2 is too old")],
)
def test_node_missing_or_old(root: Path, answers: dict[str, tuple[int, str]], detail: str) -> None:
    check = node_check(Tools(**answers), root)
    assert (check.status, check.detail, check.fix) == ("fail", detail, "install Node.js 22 or newer")


def test_cdk_cli_missing_or_not_the_pinned_version(root: Path) -> None:
    missing = cdk_check(Tools(npx=(1, "")), root)
    assert missing.status == "fail" and missing.fix == "npm ci --no-audit --no-fund"
    other = cdk_check(Tools(npx=(0, "2.1000.0 (build x)")), root)
    assert other.status == "fail" and other.detail == "CDK CLI 2.1000.0, package.json pins 2.1148.1"


def test_docker_missing_fails_unless_a_prebuilt_image_is_configured(root: Path) -> None:
    assert docker_check(Tools(), root, prebuilt_image=None).status == "fail"
    tools = Tools()
    prebuilt = docker_check(tools, root, prebuilt_image=IMAGE)
    assert prebuilt.status == "ok" and IMAGE in prebuilt.detail
    assert tools.ran == []  # Docker is not even asked


def test_an_arm64_machine_needs_buildx(root: Path) -> None:
    without = docker_check(Tools(docker=(0, "28.2.2")), root, prebuilt_image=None, machine="arm64")
    assert without.status == "fail" and "buildx" in without.fix
    with_buildx = Tools(docker=(0, "28.2.2"), docker_buildx=(0, "github.com/docker/buildx v0.25.0"))
    assert docker_check(with_buildx, root, prebuilt_image=None, machine="aarch64").status == "ok"


def test_the_real_runner_reports_a_missing_program(tmp_path: Path) -> None:
    assert subprocess_runner(["gco-no-such-program-anywhere"], tmp_path) == (NOT_FOUND, "")
    assert subprocess_runner(["python3", "-c", "print('v1')"], tmp_path) == (0, "v1")
