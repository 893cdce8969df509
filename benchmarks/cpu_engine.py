"""The local stack's CPU engine: start-up time and decode tokens/s of SmolLM2-135M on llama.cpp.

Each run starts the engine (`python -m gco.local.llama.llama_engine`) as the local stack does, measures
the time from launch until `/health` answers (start-up: Python, the server, the model load), then
sends the same greedy completions one at a time and reports decode tokens/s (completion tokens
over the request's wall time, the prompt being a few tokens). The peer measured in the same run is
the same server with one thread against two (the local stack runs one thread per replica), and
the fake engine's start-up is the baseline a test pays. Prints one line per candidate and the ratio.

    .venv/bin/python benchmarks/cpu_engine.py [--runs 3] [--tokens 64]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import httpx

from gco.local.processes.listen import free_port

PROMPTS = ("The capital of France is", "Write one sentence about the sea:", "List three colours:")


def start(argv: list[str], port: int, timeout: float = 120.0) -> tuple[subprocess.Popen[bytes], float]:
    began = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = began + timeout
    while time.perf_counter() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).status_code == 200:
                return process, time.perf_counter() - began
        except httpx.HTTPError:
            pass
        if process.poll() is not None:
            raise SystemExit(f"{argv[2]} exited {process.returncode} before it answered")
        time.sleep(0.02)
    process.kill()
    raise SystemExit(f"{argv[2]} did not answer within {timeout} s")


def decode_rate(port: int, tokens: int) -> float:
    rates: list[float] = []
    for prompt in PROMPTS:
        body = {"prompt": prompt, "max_tokens": tokens, "temperature": 0}
        began = time.perf_counter()
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=300).json()
        rates.append(answer["usage"]["completion_tokens"] / (time.perf_counter() - began))
    return statistics.median(rates)


def measure(argv: list[str], port: int, runs: int, tokens: int | None) -> tuple[float, float | None]:
    starts, rates = [], []
    for _ in range(runs):
        process, seconds = start(argv, port)
        starts.append(seconds)
        try:
            if tokens:
                rates.append(decode_rate(port, tokens))
        finally:
            process.terminate()
            process.wait(timeout=30)
    return statistics.median(starts), statistics.median(rates) if rates else None


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    options = parser.parse_args()
    results = {}
    for threads in (1, 2):
        port = free_port()
        argv = [
            sys.executable,
            "-m",
            "gco.local.llama.llama_engine",
            "--port",
            str(port),
            "--threads",
            str(threads),
        ]
        results[threads] = measure(argv, port, options.runs, options.tokens)
        startup, rate = results[threads]
        print(
            f"llama.cpp SmolLM2-135M Q4_1, {threads} thread(s): "
            f"start-up {startup:.2f} s, decode {rate:.1f} tok/s"
        )
    port = free_port()
    fake = [sys.executable, "-m", "gco.bench.fake_engine", "--port", str(port)]
    fake_start, _ = measure(fake, port, options.runs, None)
    print(f"fake engine: start-up {fake_start:.2f} s")
    one, two = results[1][1] or 0.0, results[2][1] or 0.0
    print(
        f"decode ratio 2 threads / 1 thread: {two / one:.2f}x; "
        f"start-up llama / fake: {results[1][0] / fake_start:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
