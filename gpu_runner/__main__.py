"""Container entry point: GCO_JOB_KEY and GCO_EVIDENCE_BUCKET name the job; exit status 0 or 1.

GCO_MODEL_TOKEN_SECRET, where set, names the Secrets Manager secret read into HF_TOKEN first
(`gpu_runner.model_token`)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from gco import aws
from gco.env import (
    AWS_REGION_ENV,
    EVIDENCE_BUCKET_ENV,
    HEARTBEAT_SECONDS_ENV,
    JOB_KEY_ENV,
    JOB_WAIT_SECONDS_ENV,
)
from gpu_runner.model_token import load_model_token
from gpu_runner.runner import RunnerError, run_job, runner_id
from gpu_runner.start import start

JOB_WAIT_SECONDS = 600.0


def main() -> int:
    bucket, key = os.environ.get(EVIDENCE_BUCKET_ENV), os.environ.get(JOB_KEY_ENV)
    if not bucket or not key:
        print(f"gpu_runner: {EVIDENCE_BUCKET_ENV} and {JOB_KEY_ENV} must be set", file=sys.stderr)
        return 2
    region = os.environ.get(AWS_REGION_ENV)
    s3, sfn = aws.client("s3", region=region), aws.client("stepfunctions", region=region)
    try:
        load_model_token(aws.client("secretsmanager", region=region), os.environ)
    except RunnerError as error:
        print(f"gpu_runner: {error}", file=sys.stderr)
        return 1
    wait = float(os.environ.get(JOB_WAIT_SECONDS_ENV, JOB_WAIT_SECONDS))
    interval = float(os.environ.get(HEARTBEAT_SECONDS_ENV, "60"))
    with tempfile.TemporaryDirectory(prefix="gco-runner-") as workdir:
        try:
            runner = runner_id(aws.client("sts", region=region))
            message = start(s3, sfn, bucket, key, runner=runner, wait=wait)
            if message is None:
                print("gpu_runner: the execution no longer waits for this runner", file=sys.stderr)
                return 1
            outcome = run_job(
                message,
                sfn=sfn,
                s3=s3,
                bucket=bucket,
                workdir=Path(workdir),
                runner=runner,
                heartbeat_interval=interval,
            )
        except RunnerError as error:
            print(f"gpu_runner: {error}", file=sys.stderr)
            return 1
    print(
        f"gpu_runner: {message.execution} {'succeeded' if outcome.succeeded else 'failed'}", file=sys.stderr
    )
    return 0 if outcome.succeeded else 1


if __name__ == "__main__":
    sys.exit(main())
