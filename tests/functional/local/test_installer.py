"""The set-up's installer command lines, run for real: uv (the dev lock's) installs a wheel made here
into a fresh virtual environment with each option the set-up passes it (the lock's hashes checked,
no index, a find-links folder, `--only-binary`, `--no-deps`, with and without the bytecode), and
refuses a file whose hash the lock does not name. No network: every package is a local file."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gco.local.llama.installer import UV, Installer

TIMEOUT_S = 120.0  # a bound on each command, never a measured duration


def make_wheel(folder: Path, name: str = "gco_probe", version: str = "1.0") -> Path:
    """A pure-Python wheel of one module, `<name>.py`, with the metadata pip and uv read (PEP 427)."""
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": "ANSWER = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: gco-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A fresh virtual environment without pip (uv installs into it from outside); its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True,
                   timeout=TIMEOUT_S)  # fmt: skip
    return tmp_path / "venv" / "bin" / "python"


def run(argv: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    # uv's own cache in the test's folder; the running uv is this environment's (the dev lock's)
    uv = Path(sys.executable).with_name("uv")
    argv = [str(uv) if part == "uv-binary" else part for part in argv]
    env = {"PATH": "/usr/bin:/bin", "UV_CACHE_DIR": str(cache), "HOME": str(cache)}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def site_packages(python: Path) -> Path:
    return next((python.parent.parent / "lib").glob("python3*/site-packages"))


def installed(python: Path) -> list[str]:
    """The probe's files in the environment: its module, its metadata and its bytecode."""
    site = site_packages(python)
    return sorted(str(path.relative_to(site)) for path in site.rglob("gco_probe*"))


def test_uv_installs_the_set_up_s_command_lines_into_the_named_environment(
    tmp_path: Path, venv: Path
) -> None:
    wheel = make_wheel(tmp_path / "wheels")
    uv = Installer((sys.executable, "-P"), UV)
    argv = uv.install("--no-index", "--find-links", str(wheel.parent), "--only-binary", "gco-probe",
                      "--no-deps", "gco-probe==1.0", byte_compile=False)  # fmt: skip
    # installed for the interpreter named by --python, not for the one that ran `python -m uv`
    argv[argv.index("--python") + 1] = str(venv)
    done = run(argv, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    found = subprocess.run([str(venv), "-c", "import gco_probe; print(gco_probe.ANSWER)"],
                           capture_output=True, text=True, timeout=TIMEOUT_S, check=True)  # fmt: skip
    assert found.stdout == "42\n"
    assert not any(name.endswith(".pyc") for name in installed(venv))


def test_uv_checks_the_lock_s_hashes_and_writes_bytecode_where_asked(tmp_path: Path, venv: Path) -> None:
    wheel = make_wheel(tmp_path / "wheels")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    lock = tmp_path / "x.lock"
    uv = Installer((str(venv),), UV)
    argv = uv.install("--no-index", "--find-links", str(wheel.parent), "--require-hashes", "-r", str(lock))
    argv[:3] = ["uv-binary"]  # this environment's uv (the fresh one has none), the same arguments
    lock.write_text(f"gco-probe==1.0 \\\n    --hash=sha256:{'0' * 64}\n")
    refused = run(argv, tmp_path / "cache")
    assert refused.returncode != 0 and "hash" in refused.stderr.lower()
    assert installed(venv) == []  # nothing was installed
    lock.write_text(f"gco-probe==1.0 \\\n    --hash=sha256:{digest}\n")
    done = run(argv, tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    bytecode = [name for name in installed(venv) if name.startswith("__pycache__/gco_probe.")]
    assert bytecode and all(name.endswith(".pyc") for name in bytecode)
