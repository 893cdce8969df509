"""AIPerf and GuideLLM as peers of `gco bench serve` in `client_capacity.py`: each from a venv of its
own (never the project's), driven on the same schedule against the same fake server, read from its own
output files. They need a tokenizer: a tiny one is trained offline with their own libraries
(`train_tokenizer`) unless one is given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

NAMES = ("aiperf", "guidellm")


class Served(Protocol):
    """The fake server a peer is pointed at."""

    url: str


Pin = Callable[["int | None", list[str]], list[str]]


class Peer:
    """AIPerf or GuideLLM from a separate venv, driven on the same schedule and read from its own output."""

    def __init__(self, name: str, venv: Path, tokenizer: Path, tokens: int, pin: Pin) -> None:
        self.name = name
        self.binary = venv / "bin" / name
        self.tokenizer = tokenizer
        self.tokens = tokens
        self.pin = pin

    def argv(self, url: str, rate: float | None, count: int, out: Path) -> list[str]:
        if self.name == "aiperf":
            load = (
                ["--request-rate", str(rate), "--arrival-pattern", "constant"]
                if rate
                else ["--concurrency", "1"]
            )
            return [
                str(self.binary),
                "profile",
                "--model",
                "m",
                "--url",
                url,
                "--endpoint-type",
                "completions",
                "--streaming",
                "--tokenizer",
                str(self.tokenizer),
                *load,
                "--request-count",
                str(count),
                "--extra-inputs",
                f"max_tokens:{self.tokens}",
                "--output-artifact-dir",
                str(out),
                "--ui-type",
                "none",
            ]
        profile = f"kind=constant,rate={rate}" if rate else "kind=synchronous"
        return [
            str(self.binary),
            "run",
            "--backend",
            f"kind=openai_http,target={url},model=m",
            "--profile",
            profile,
            "--constraint",
            f"kind=max_requests,count={count}",
            "--tokenizer",
            f"kind=hf_auto,model={self.tokenizer}",
            "--data",
            f"kind=synthetic_text,prompt_tokens=32,output_tokens={self.tokens}",
            "--output",
            f"kind=json,path={out / 'out.json'}",
            "--disable-console",
        ]

    def rows(self, out: Path) -> list[dict[str, Any]]:
        rows: list[tuple[float, dict[str, Any]]] = []
        if self.name == "aiperf":
            for line in (out / "profile_export.jsonl").read_text().splitlines():
                record = json.loads(line)
                metrics = record.get("metrics", {})
                ttft = metrics.get("time_to_first_token", {}).get("value")
                chunks = metrics.get("inter_chunk_latency", {}).get("value") or []
                ok = not record.get("error") and ttft is not None
                rows.append(
                    (
                        record["metadata"]["request_start_ns"] / 1e9,
                        {
                            "ok": ok,
                            "ttft_s": ttft / 1000 if ok else None,
                            "itl_s": statistics.fmean(chunks) / 1000 if chunks else None,
                        },
                    )
                )
        else:
            requests = json.loads((out / "out.json").read_text())["benchmarks"][0]["requests"]
            for item in requests["successful"]:
                rows.append(
                    (
                        item["request_start_time"],
                        {
                            "ok": True,
                            "ttft_s": item["time_to_first_token_ms"] / 1000,
                            "itl_s": item["inter_token_latency_ms"] / 1000,
                        },
                    )
                )
            for item in requests["errored"] + requests["incomplete"]:
                rows.append(
                    (item.get("request_start_time") or 0.0, {"ok": False, "ttft_s": None, "itl_s": None})
                )
        return [row for _, row in sorted(rows, key=lambda pair: pair[0])]

    def run(
        self, server: Served, rate: float | None, count: int, core: int | None, work: Path
    ) -> list[dict[str, Any]]:
        out = work / f"{self.name}-{time.monotonic_ns()}"
        out.mkdir()
        done = subprocess.run(
            self.pin(core, self.argv(server.url, rate, count, out)),
            cwd=work,
            capture_output=True,
            check=False,
            timeout=900,
        )
        try:
            return self.rows(out)
        except (OSError, KeyError, IndexError, ValueError) as error:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise RuntimeError(
                f"{self.name} produced no readable output ({error}); {tail[0][:200]}"
            ) from error


TOKENIZER_SCRIPT = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast
words = "tell me about item request the a of and to in is it you that was for on are as with tok".split()
tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.Whitespace()
corpus = [" ".join(words)] * 10 + [str(i) for i in range(1000)]
tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"]))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", bos_token="<s>", eos_token="</s>")
fast.save_pretrained(sys.argv[1])
"""


def install_peers(venv: Path) -> str:
    """Create `venv` and install AIPerf and GuideLLM from PyPI into it (never into the project's venv)."""
    if (venv / "bin" / "aiperf").exists() and (venv / "bin" / "guidellm").exists():
        return ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "aiperf", "guidellm"],
            check=True,
            timeout=900,
            capture_output=True,
        )
    except (subprocess.SubprocessError, OSError) as error:
        return f"installing AIPerf and GuideLLM from PyPI failed here: {str(error)[:200]}"
    return ""


def train_tokenizer(venv: Path, target: Path) -> Path | None:
    """Train a tiny word-level tokenizer offline with the peers' own libraries (gco itself needs none)."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", TOKENIZER_SCRIPT, str(target)],
        check=False,
        capture_output=True,
        timeout=300,
    )
    return target if done.returncode == 0 and (target / "tokenizer.json").exists() else None


def find_peers(venv: Path | None, tokenizer: Path | None, tokens: int, pin: Pin) -> tuple[list[Peer], str]:
    """The peers that can run here, and a note saying which cannot and why (never project dependencies)."""
    if venv is None:
        return (
            [],
            "AIPerf and GuideLLM: not measured (give --peers-venv with both installed, and --tokenizer)",
        )
    if tokenizer is None or not (tokenizer / "tokenizer.json").exists():
        return (
            [],
            "AIPerf and GuideLLM: not measured (they need a local tokenizer, --tokenizer DIR; gco does not)",
        )
    peers = [Peer(name, venv, tokenizer, tokens, pin) for name in NAMES if (venv / "bin" / name).exists()]
    missing = sorted(set(NAMES) - {peer.name for peer in peers})
    return peers, f"peers not installed in {venv}: {', '.join(missing)}" if missing else ""


def prepare_peers(args: argparse.Namespace, tokens: int, pin: Pin) -> tuple[list[Peer], str]:
    """AIPerf and GuideLLM where asked for (installed first with --install-peers), and a note on why not."""
    install_note = install_peers(args.peers_venv) if args.install_peers and args.peers_venv else ""
    tokenizer = args.tokenizer
    if args.peers_venv is not None and tokenizer is None and (args.peers_venv / "bin" / "python").exists():
        tokenizer = train_tokenizer(args.peers_venv, Path(tempfile.mkdtemp(prefix="gco-tok-")))
    peers, note = find_peers(args.peers_venv, tokenizer, tokens, pin)
    return peers, "; ".join(part for part in (install_note, note) if part)
