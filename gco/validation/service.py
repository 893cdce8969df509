"""What `gco matrix validate|run|resume|destroy` call: check the settings, start, continue or end a run.

A run directory `D` holds `matrix/checkpoint.json` and `evidence/`; a resumed run reads its settings
again (from `--settings`, or the file the checkpoint names), so an edited file is noticed (its
identity differs) and refused before anything is touched. With a run URI (`s3://...`), every
checkpoint revision and the evidence files are also written there as the run goes (`mirror.py`).
`destroy` needs no settings file: what it needs (the retry and timeout settings) is in the
checkpoint's identity.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.specfile import load_spec_file
from gco.endpoints.store import EndpointStore
from gco.evidence.index import EvidenceIndex, S3EvidenceIndex
from gco.evidence.store import EvidenceStore, S3EvidenceStore
from gco.validation.checkpoint import Checkpoint, read_checkpoint
from gco.validation.checks import Outcome
from gco.validation.connect import ProxyHttp, environment_clusters
from gco.validation.errors import CheckpointError, IdentityChangedError, SettingsError
from gco.validation.identity import first_difference, identity
from gco.validation.mirror import S3RunMirror, default_uri, fetch_run
from gco.validation.ports import Clusters, EndpointHttp
from gco.validation.report import MatrixResult
from gco.validation.run import Matrix, new_checkpoint, new_run_id
from gco.validation.settings import KEYS, MatrixSettings, parse_settings


def load_settings(path: Path) -> MatrixSettings:
    """Read a JSON or YAML settings file and check every rule.

    Raises:
        SettingsError: unreadable or unparsable (field `SETTINGS`), or the first broken rule.
    """
    try:
        raw: Any = load_spec_file(path)
    except InvalidSpecError as error:
        raise SettingsError("SETTINGS", error.message.replace("spec fields", "settings")) from None
    return parse_settings(raw)


def identity_of(path: Path) -> dict[str, Any]:
    """What identifies a run of the settings at `path` (`gco.validation.identity.identity`).

    Raises:
        SettingsError: the settings are unreadable, unparsable or break a rule.
    """
    return identity(load_settings(path))


def _matrix(
    settings: MatrixSettings,
    store: EndpointStore,
    run_dir: Path,
    evidence_bucket: str | None,
    clusters: Clusters | None,
    http: EndpointHttp | None,
    sleep: Callable[[float], None],
    run_uri: str | None = None,
) -> Matrix:
    stores: list[EvidenceStore] = [S3EvidenceStore(evidence_bucket)] if evidence_bucket else []
    indexes: list[EvidenceIndex] = [S3EvidenceIndex(evidence_bucket)] if evidence_bucket else []
    return Matrix(
        settings=settings,
        store=store,
        clusters=clusters or environment_clusters(settings.selected_region),
        http=http or ProxyHttp(timeout=settings.command_timeout_seconds),
        run_dir=run_dir,
        evidence_stores=stores,
        evidence_indexes=indexes,
        mirror=S3RunMirror(run_uri) if run_uri else None,
        sleep=sleep,
    )


def start(
    settings_path: Path,
    store: EndpointStore,
    *,
    run_dir: Path | None = None,
    evidence_bucket: str | None = None,
    run_id: str | None = None,
    run_uri: str | None = None,
    clusters: Clusters | None = None,
    http: EndpointHttp | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> MatrixResult:
    """Validate the settings and run the matrix from the start in `run_dir` (default `gco-matrix/<run>`).

    `run_uri` (`s3://bucket/prefix/`): where each checkpoint revision and the evidence files are
    also written as the run goes, so another machine can resume it; default, with an evidence
    bucket, `s3://<bucket>/matrix-runs/<run id>/`.

    Raises:
        SettingsError: the settings are unreadable, unparsable or break a rule.
    """
    settings = load_settings(settings_path)
    run = run_id or new_run_id()
    directory = (run_dir or Path("gco-matrix") / run).resolve()
    checkpoint = new_checkpoint(settings, settings_path.resolve(), run)
    uri = run_uri or default_uri(evidence_bucket, run)
    matrix = _matrix(settings, store, directory, evidence_bucket, clusters, http, sleep, uri)
    return matrix.execute(checkpoint)


def resume(
    run_dir: Path,
    store: EndpointStore,
    *,
    settings_path: Path | None = None,
    evidence_bucket: str | None = None,
    run_uri: str | None = None,
    fetch_from: str | None = None,
    clusters: Clusters | None = None,
    http: EndpointHttp | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> MatrixResult:
    """Continue the run in `run_dir` with the settings it started with, unchanged.

    `fetch_from` (`s3://bucket/prefix/`, where a run mirrored itself): first copy that folder into
    `run_dir` (another machine resuming a run whose own machine was lost).

    `settings_path` reads them from another file (a copy on another machine, the first one's
    directory gone); default: the file the checkpoint names. Either way the identity must match.
    The run keeps its deadline: a run resumed after it only destroys and reports.

    Raises:
        CheckpointError: `run_dir` holds no checkpoint.
        SettingsError: the settings file no longer passes the rules.
        IdentityChangedError: the settings' identity differs, naming the first differing field.
        MirrorError: the folder at `fetch_from` could not be copied.
    """
    if fetch_from is not None:
        fetch_run(fetch_from, run_dir)
    checkpoint = read_checkpoint(run_dir)
    path = settings_path.resolve() if settings_path is not None else Path(checkpoint.settings_path)
    settings = load_settings(path)
    differs = first_difference(checkpoint.identity, identity(settings))
    if differs is not None:
        raise IdentityChangedError(
            differs, f"differs from the identity this run started with (read from {path}); not resumed"
        )
    checkpoint = checkpoint.model_copy(update={"settings_path": str(path)})
    uri = run_uri or default_uri(evidence_bucket, checkpoint.run_id)
    matrix = _matrix(settings, store, run_dir.resolve(), evidence_bucket, clusters, http, sleep, uri)
    if checkpoint.finished and checkpoint.verdict is not None and checkpoint.evidence_id:
        matrix.progress(f"matrix {checkpoint.run_id} already finished: {checkpoint.verdict}")
    return matrix.execute(checkpoint)


def settings_of(checkpoint: Checkpoint) -> MatrixSettings:
    """The settings a checkpoint's identity records (it holds every settings key).

    Raises:
        CheckpointError: the identity lacks a key or breaks a rule (a checkpoint of another contract).
    """
    try:
        return parse_settings({key: checkpoint.identity[key] for key in KEYS})
    except (KeyError, SettingsError) as error:
        raise CheckpointError(
            "RUN_DIR", f"the checkpoint's identity holds no valid settings: {error}"
        ) from None


def destroy(
    run_dir: Path,
    store: EndpointStore,
    *,
    run_uri: str | None = None,
    clusters: Clusters | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Destroy every endpoint of the run in `run_dir`; the inventory after it (passed: nothing is left).

    Raises:
        CheckpointError: `run_dir` holds no checkpoint, or one without valid settings.
    """
    checkpoint = read_checkpoint(run_dir)
    settings = settings_of(checkpoint)
    http = ProxyHttp(timeout=settings.command_timeout_seconds, bases={})  # destroy sends no request
    matrix = _matrix(settings, store, run_dir.resolve(), None, clusters, http, sleep, run_uri)
    return matrix.destroy(checkpoint)


def result_json(result: MatrixResult) -> str:
    return json.dumps(
        {
            "run_id": result.run_id,
            "verdict": result.verdict,
            "evidence_id": result.evidence_id,
            "evidence": result.evidence_path,
            "failed_step": result.failed_step,
            "summary": {"line": result.summary},
        },
        indent=2,
        sort_keys=True,
    )
