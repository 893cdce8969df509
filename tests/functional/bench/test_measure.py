"""A cell's questions to a running engine (served models, /metrics), its measurement command and read-back."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from gco.bench.rounds.cell import CellOptions
from gco.bench.rounds.engine_http import scrape_text, served_models
from gco.bench.rounds.manifest import Manifest
from gco.bench.rounds.measure import evidence_id, read_result, run_measurement, serve_argv
from gco.evidence.record import EvidenceRecord, now_iso
from gco.local.processes.listen import free_port
from tests.functional.bench.conftest import engine_server

MANIFEST = Manifest.model_validate(
    {
        "engines": [{"label": "v", "argv": ["x"], "port": 8000, "model": {"id": "org/video"}}],
        "workload": {"request_timeout_s": 90},
    }
)


def test_served_models_and_metrics_from_a_running_engine() -> None:
    async def scenario() -> None:
        async with engine_server(model="org/video") as (url, _):
            served = await asyncio.to_thread(served_models, url)
            assert served.ids == ["org/video"]
            assert served.lists("org/video")
            assert not served.lists("fake/model")
            missing = await asyncio.to_thread(served_models, url + "/nowhere")
            assert missing.ids == []
            assert missing.error == "GET /v1/models answered 404"
            text = await asyncio.to_thread(scrape_text, url)
            assert text is not None
            assert "vllm:request_success_total" in text

    asyncio.run(scenario())
    closed = f"http://127.0.0.1:{free_port()}"
    assert served_models(closed).error is not None
    assert scrape_text(closed) is None


def test_clip_cells_run_bench_clip_or_the_serve_cmd(tmp_path: Path) -> None:
    options = CellOptions(mode="clip", prompts_path=Path("/clips.jsonl"), run_dir=tmp_path)
    argv = serve_argv(MANIFEST.engines[0], MANIFEST, options, tmp_path / "cell", 1)
    assert argv[1:6] == ["-P", "-m", "gco.cli", "bench", "clip"]
    assert argv[argv.index("--clips") + 1] == "/clips.jsonl"
    assert argv[argv.index("--warmup") + 1] == "0"
    assert argv[argv.index("--timeout") + 1] == "90.0"
    assert "--model" not in argv
    custom = options.model_copy(update={"serve_cmd": "mine {mode} {prompts} {model}"})
    assert serve_argv(MANIFEST.engines[0], MANIFEST, custom, tmp_path, 1) == [
        "mine",
        "clip",
        "/clips.jsonl",
        "org/video",
    ]


def test_the_read_back_names_what_is_missing(tmp_path: Path) -> None:
    assert read_result("clip", tmp_path).error is not None
    assert "clip/result.json not readable" in str(read_result("clip", tmp_path).error)
    failed = run_measurement(
        [sys.executable, "-c", "print('boom'); raise SystemExit(3)"], "single", tmp_path, 30
    )
    assert failed.error == "measurement exited 3: boom"
    assert run_measurement(["/nonexistent/serve"], "single", tmp_path, 30).error is not None
    slow = run_measurement([sys.executable, "-c", "import time; time.sleep(5)"], "single", tmp_path, 0.2)
    assert slow.error == "measurement ran past 0.2 s"


def test_evidence_id_only_when_exactly_one_valid_record(tmp_path: Path) -> None:
    assert evidence_id(tmp_path) is None
    folder = tmp_path / "evidence"
    folder.mkdir()
    (folder / "junk.json").write_text("{}")
    assert evidence_id(tmp_path) is None
    records = [
        EvidenceRecord(
            kind="bench.clip", claim_class="observed", summary=s, created_at=now_iso(), identity={}
        ).sealed()
        for s in ("one", "two")
    ]
    (folder / f"{records[0].id}.json").write_text(records[0].to_json())
    assert evidence_id(tmp_path) == records[0].id
    (folder / f"{records[1].id}.json").write_text(records[1].to_json())
    assert evidence_id(tmp_path) is None
