"""The job a runner receives: the message RunJob writes, and each job kind's command line.

Job kinds are a tagged union on `kind`: `bench-rounds` (`gco bench rounds`) and `matrix` (the live
validation matrix, `gco matrix run`, or `gco matrix resume` of an earlier execution's run directory).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RoundsJob(_Model):
    """`gco bench rounds` with an inline manifest and prompt set."""

    kind: Literal["bench-rounds"] = "bench-rounds"
    manifest: dict[str, Any]
    prompts: list[str] = Field(min_length=1)
    mode: Literal["single", "load"] = "single"
    rounds: int | None = Field(default=None, ge=1, le=1000)
    engines: list[str] = Field(default_factory=list)
    ci_target: float | None = Field(default=None, gt=0)
    min_rounds: int | None = Field(default=None, ge=1, le=1000)
    serve_args: list[str] = Field(default_factory=list)

    def argv(self, workdir: Path, run_dir: Path, bucket: str, run_uri: str) -> list[str]:
        """Write the inputs under `workdir` and return the command that runs the job.

        `run_uri` is unused: `gco bench rounds` writes its run directory, uploaded when it ends."""
        workdir.mkdir(parents=True, exist_ok=True)
        manifest, prompts = workdir / "manifest.json", workdir / "prompts.jsonl"
        manifest.write_text(json.dumps(self.manifest), encoding="utf-8")
        prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in self.prompts), encoding="utf-8")
        argv = [
            "gco",
            "bench",
            "rounds",
            "--manifest",
            str(manifest),
            "--prompts",
            str(prompts),
            "--mode",
            self.mode,
            "--run-dir",
            str(run_dir),
            "--evidence-bucket",
            bucket,
            "--output",
            "json",
        ]
        for flag, value in (
            ("--rounds", self.rounds),
            ("--ci-target", self.ci_target),
            ("--min-rounds", self.min_rounds),
        ):
            if value is not None:
                argv += [flag, str(value)]
        if self.engines:
            argv += ["--engines", ",".join(self.engines)]
        for arg in self.serve_args:
            argv += ["--serve-arg", arg]
        return argv


EXECUTION = r"^[A-Za-z0-9_-]{1,80}$"
# The state input's fields the runner and the state machine share: the job, a matrix job's settings,
# and where the state machine keeps the runner's answer to the start message (its presence marks the
# job message; stacks/constructs/runner_workflow.py).
JOB_FIELD = "job"
SETTINGS_FIELD = "settings"
STARTED_FIELD = "started"
Phase = Literal["start", "run"]


class MatrixJob(_Model):
    """`gco matrix run` with inline settings, or `gco matrix resume` of an earlier execution.

    The settings are checked by `gco matrix` itself (one place for the rules; a bad value fails the
    job with the line naming the field). Their `consent: true` is the job's consent to deploy and
    destroy, so the command gets `--consent`. With `resume_execution`, the runner first copies that
    execution's run directory (`runs/<execution>/` in the bucket) into its own and resumes it. The
    run writes each checkpoint revision to the runner's own folder as it goes (`--run-uri`), so a
    later job can resume it even when this runner's machine is lost.
    """

    kind: Literal["matrix"] = "matrix"
    settings: dict[str, Any]
    resume_execution: str | None = Field(default=None, pattern=EXECUTION)

    def argv(self, workdir: Path, run_dir: Path, bucket: str, run_uri: str) -> list[str]:
        """Write the settings under `workdir` and return the command that runs the job."""
        workdir.mkdir(parents=True, exist_ok=True)
        settings = workdir / "settings.json"
        settings.write_text(json.dumps(self.settings), encoding="utf-8")
        tail = ["--evidence-bucket", bucket, "--run-uri", run_uri, "--output", "json"]
        if self.resume_execution is not None:
            return ["gco", "matrix", "resume", str(run_dir), "--settings", str(settings), *tail]
        return ["gco", "matrix", "run", str(settings), "--consent", "--run-dir", str(run_dir), *tail]

    @staticmethod
    def destroy_argv(run_dir: Path, run_uri: str) -> list[str]:
        """The runner's failure path: destroy whatever the run left (`gco matrix destroy`)."""
        return ["gco", "matrix", "destroy", str(run_dir), "--run-uri", run_uri, "--output", "json"]


Job = Annotated[RoundsJob | MatrixJob, Field(discriminator="kind")]


class JobMessage(_Model):
    """What the state machine writes to `jobs/<execution>.json`: first the start message (AwaitRunner:
    the runner answers it once it is up), then the job message (RunJob: the runner runs the job)."""

    task_token: str = Field(min_length=1, pattern=r"^\S+$")
    execution: str = Field(pattern=EXECUTION)
    instance_ids: list[str] = Field(default_factory=list)
    phase: Phase = "run"
    job: Job

    @classmethod
    def from_wire(cls, text: str) -> JobMessage:
        """Parse `<task token> <execution name> <state input JSON>` (stacks/constructs/runner_workflow.py).

        Raises:
            ValueError: not three space-separated parts, or the JSON or a field is invalid.
        """
        parts = text.split(" ", 2)
        if len(parts) != 3:
            raise ValueError("job message: expected '<task token> <execution> <input JSON>'")
        state = json.loads(parts[2])
        if not isinstance(state, dict):
            raise ValueError("job message: the state input must be a JSON object")
        instance_ids = (state.get("instance") or {}).get("InstanceIds") or []
        return cls.model_validate(
            {
                "task_token": parts[0],
                "execution": parts[1],
                "instance_ids": instance_ids,
                "phase": "run" if STARTED_FIELD in state else "start",
                "job": state.get(JOB_FIELD),
            }
        )
