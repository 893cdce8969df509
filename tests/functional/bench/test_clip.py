"""Clip mode end to end: the fake engine's clips, `gco bench clip`, and `gco bench rounds --mode clip`.

The fake engine answers a clip of size S after exactly CLIP_MS[S] / speed (asyncio may wake one clock tick
early, never later than the client sees), so every client-timed clip is that known time plus an overhead
0 <= d <= D, where D is read from the run's own clip records. Any median or mean over clips then lies within
[nominal, nominal + D], and so does every ratio's band below: the truth is known up to D, not up to a
tuned constant.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from gco.bench.clients.transport import Client
from gco.cli import main
from gco.evidence import validate
from gco.local.processes.listen import free_port
from tests.functional.bench.conftest import engine_server, fake_argv

CLIP_MS = {"320x180": 30.0, "640x360": 60.0}
SPEEDS = {"fast": 2.0, "mid": 1.5, "slow": 1.0}
TICK_S = time.get_clock_info("monotonic").resolution


def _clip_flags() -> list[str]:
    return [flag for size, ms in CLIP_MS.items() for flag in ("--clip-ms", f"{size}={ms:g}")]


def _clips(tmp_path: Path, per_shape: int = 2) -> Path:
    path = tmp_path / "clips.jsonl"
    lines = [
        json.dumps({"path": "/v1/videos", "body": {"prompt": f"a cat {i}", "size": size}, "shape": size})
        for size in CLIP_MS
        for i in range(per_shape)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _engine(label: str, *flags: str) -> dict[str, Any]:
    port = free_port()
    return {
        "label": label,
        "argv": fake_argv(port, *flags),
        "port": port,
        "model": {"id": "fake/model"},
        "ready_check": {"timeout_s": 20, "interval_s": 0.05},
    }


def test_fake_clip_answers_after_its_known_time_and_refuses_unknown_sizes() -> None:
    async def scenario() -> None:
        async with engine_server(clip_s={"320x180": 0.03}, speed=2.0) as (url, engine):
            client = Client(url)
            started = time.perf_counter()
            status, body = await client.post("/v1/videos", json.dumps({"size": "320x180"}).encode())
            elapsed = time.perf_counter() - started
            assert status == 200
            assert json.loads(body)["object"] == "video"
            assert elapsed >= 0.015 - TICK_S
            status, body = await client.post("/v1/videos", json.dumps({"size": "4k"}).encode())
            assert status == 400
            assert b"unknown size" in body
            client.close()
            assert engine.counters.success == 1
            assert engine.counters.failed == 1

    asyncio.run(scenario())


def test_bench_clip_times_each_shape_and_writes_evidence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def serve(stop: asyncio.Event, ready: asyncio.Future[str]) -> None:
        async with engine_server(clip_s={size: ms / 1000 for size, ms in CLIP_MS.items()}) as (url, _):
            ready.set_result(url)
            await stop.wait()

    clips = _clips(tmp_path)
    clips.write_text(
        clips.read_text() + json.dumps({"path": "/v1/videos", "body": {"size": "4k"}, "shape": "4k"}) + "\n"
    )
    run = tmp_path / "run"

    async def scenario() -> int:
        stop = asyncio.Event()
        ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        server = asyncio.create_task(serve(stop, ready))
        url = await ready
        argv = [
            "bench",
            "clip",
            "--base-url",
            url,
            "--clips",
            str(clips),
            "--run-dir",
            str(run),
            "-o",
            "json",
        ]
        code = await asyncio.to_thread(main, argv)
        stop.set()
        await server
        return code

    assert asyncio.run(scenario()) == 0
    out = json.loads(capsys.readouterr().out)
    record = validate(json.loads(Path(out["evidence"]).read_text()))
    assert record.kind == "bench.clip"
    assert record.claim_class == "observed"
    assert {a.role for a in record.artifacts} == {"result", "clips"}
    result = out["result"]
    assert result["clips"] == 5
    assert result["failed_by_shape"] == {"all": 1, "320x180": 0, "640x360": 0, "4k": 1}
    for size, ms in CLIP_MS.items():
        assert result["shapes"][size]["clips"] == 2
        assert result["shapes"][size]["e2e_ms"] >= ms - TICK_S * 1000
    assert record.limitations[0].text.startswith("1 of 5 clip(s) failed")
    records = [json.loads(line) for line in (run / "clip" / "clips.jsonl").read_text().splitlines()]
    assert [r["shape"] for r in records] == ["320x180", "320x180", "640x360", "640x360", "4k"]
    assert records[-1]["status"] == 400


def _rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engines: list[dict[str, Any]], *args: str
) -> Path:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        json.dumps({"engines": engines, "stop_timeout_s": 2, "workload": {"warmup_requests": 1}})
    )
    monkeypatch.setenv("GCO_GPU_LOCK", str(tmp_path / "gpu.lock"))
    run = tmp_path / "run"
    argv = ["bench", "rounds", "--manifest", str(manifest), "--prompts", str(_clips(tmp_path))]
    assert main([*argv, "--mode", "clip", "--run-dir", str(run), "-o", "json", *args]) == 0
    return run


def _band(
    metric: str, nominal: dict[str, float], label: str, best: str, overhead: float
) -> tuple[float, float]:
    """Where the ratio label/best lies when each statistic is its nominal value plus 0..overhead."""
    mine, theirs = nominal[label], nominal[best]
    if metric == "clips_per_min":  # a rate: the ratio of rates is the inverse ratio of mean times
        return theirs / (mine + overhead), (theirs + overhead) / mine
    return mine / (theirs + overhead), (mine + overhead) / theirs


@pytest.mark.slow
def test_three_clip_engines_in_rounds_ratio_cis_hold_the_known_truth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines = [_engine(label, "--speed", str(speed), *_clip_flags()) for label, speed in SPEEDS.items()]
    run = _rounds(tmp_path, monkeypatch, engines)
    summary = json.loads((run / "rounds" / "summary.json").read_text())
    assert summary["mode"] == "clip"
    assert summary["cells_ok"] == 18
    assert summary["balanced"]
    overheads = []
    for cell_dir in (run / "rounds").glob("r*-*"):
        speed = SPEEDS[cell_dir.name.split("-", 2)[2]]
        for line in (cell_dir / "clip" / "clips.jsonl").read_text().splitlines():
            clip = json.loads(line)
            assert clip["ok"]
            overheads.append(clip["e2e_s"] - CLIP_MS[clip["shape"]] / 1000 / speed)
    assert len(overheads) == 18 * 4
    assert min(overheads) >= -TICK_S, "a clip was timed shorter than the engine took: not timed whole"
    overhead = max(overheads) * 1000
    nominal_ms = {
        bucket: {label: base / speed for label, speed in SPEEDS.items()}
        for bucket, base in {**CLIP_MS, "all": sum(CLIP_MS.values()) / len(CLIP_MS)}.items()
    }
    ratios = [m for m in summary["metrics"] if m["ratio_ci95"] is not None]
    assert {(m["bucket"], m["metric"]) for m in ratios} == {
        (bucket, metric) for bucket in nominal_ms for metric in ("e2e_ms", "clips_per_min")
    }
    for m in ratios:
        lo, hi = m["ratio_ci95"]
        band_lo, band_hi = _band(m["metric"], nominal_ms[m["bucket"]], m["label"], m["best_label"], overhead)
        assert lo <= band_hi and band_lo <= hi, (m, (band_lo, band_hi), overhead)
        assert m["claim_class"] == "observed"
    if overhead < nominal_ms["all"]["mid"] - nominal_ms["all"]["fast"]:
        assert summary["best_engine"] == "fast"
    record = validate(json.loads(next((run / "evidence").glob("*.json")).read_text()))
    assert record.claim_class == "observed"
    assert record.identity["mode"] == "clip"
    cell = record.data["cells"][0]
    assert cell["served_model"] == "fake/model"
    assert len(list((run / "rounds").glob(f"*/evidence/{cell['evidence_id']}.json"))) == 1
    assert cell["counter_deltas"]["vllm:request_success_total"] == 4
    assert {"clip result", "measurement evidence", "resolved config", "metrics before", "metrics after"} <= {
        a.role for a in record.artifacts
    }


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--ci-target", "0.1"], "--ci-target"),
        (["--ci-target", "0.1", "--min-rounds", "2"], "--ci-target, --min-rounds"),
        (["--min-rounds", "2"], "--min-rounds"),
        (["--extra-body", '{"stream": false}'], "--extra-body"),
        (["--chat-template-kwargs", '{"t": 1}'], "--chat-template-kwargs"),
        (["--ref-e2e-ms", "100"], "--ref-e2e-ms"),
    ],
)
def test_clip_mode_refuses_token_stream_flags(
    tmp_path: Path, args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"engines": [_engine("a", *_clip_flags())]}))
    argv = ["bench", "rounds", "--manifest", str(manifest), "--prompts", str(_clips(tmp_path))]
    assert main([*argv, "--mode", "clip", "--run-dir", str(tmp_path / "run"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"error: {named}: ")
    assert not (tmp_path / "run").exists()


def test_clip_mode_refuses_the_manifest_token_stream_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "manifest.json"
    workload = {"extra_body": {"ignore_eos": True}, "load": {"reference_e2e_s": 0.5}}
    manifest.write_text(json.dumps({"engines": [_engine("a")], "workload": workload}))
    argv = [
        "bench",
        "rounds",
        "--manifest",
        str(manifest),
        "--prompts",
        str(_clips(tmp_path)),
        "--mode",
        "clip",
    ]
    assert main(argv) == 2
    assert "manifest.workload.extra_body, manifest.workload.load.reference_e2e_s" in capsys.readouterr().err
