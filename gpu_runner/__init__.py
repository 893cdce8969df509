"""The GPU runner: the container the Step Functions task starts on a GPU instance.

It answers the start message (it is up: `start`), reads its job (and the task token) from the
evidence bucket, sends heartbeats while the job runs, uploads the evidence and run directory, and
answers the task with success or failure.
"""

from gpu_runner.job import JobMessage, MatrixJob, RoundsJob
from gpu_runner.runner import JobError, Outcome, RunnerError, run_job

__all__ = ["JobError", "JobMessage", "MatrixJob", "Outcome", "RoundsJob", "RunnerError", "run_job"]
