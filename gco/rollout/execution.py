"""Starting a rollout's Step Functions execution: one per rollout, named so a retry starts none twice.

The execution's name is `<endpoint>-<lifecycle id, 12>-<sha256 of the image, 12>` (at most 80
characters, Step Functions' limit): a second StartExecution of the same name and input is answered
with the running execution, a standard workflow's idempotency
(https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html: "If
StartExecution is called with the same name and input as a running execution, the call succeeds and
return the same response as the original request"). The CLI (`gco inference rollout
--via-step-functions`) and the table stream's starter (a record's `rollout_request`) both start it here.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco.rollout.errors import ExecutionStartError
from gco.rollout.state import RolloutSettings

STATE_MACHINE_ENV = "GCO_ROLLOUT_STATE_MACHINE_ARN"  # the rollout state machine (the global stack's output)
STATE_MACHINE_SUFFIX = "-rollout"  # the state machine's name: `<prefix>-rollout`


def execution_name(endpoint: str, lifecycle_id: str, image: str) -> str:
    """The execution's name for one rollout of `image` on one lifecycle of `endpoint`."""
    return f"{endpoint}-{lifecycle_id[:12]}-{hashlib.sha256(image.encode()).hexdigest()[:12]}"


def execution_input(settings: RolloutSettings, lifecycle_id: str) -> dict[str, Any]:
    """The execution's input: the settings, and the lifecycle it must find (or start nothing)."""
    # A reason only when one was given: the input of a rollout without one stays what it always was,
    # so StartExecution of the same name finds the same input (idempotent across an upgrade).
    unset = {"allow_unvalidated"} if settings.allow_unvalidated is None else None
    return {"settings": settings.model_dump(mode="json", exclude=unset), "lifecycle_id": lifecycle_id}


def start(client: Any, state_machine_arn: str, settings: RolloutSettings, lifecycle_id: str) -> str:
    """Start (or find, when it runs already) the rollout's execution; returns its ARN.

    Raises:
        ExecutionStartError: Step Functions refused (a finished execution of that name with another
            input, a missing state machine, access) or could not be reached.
    """
    try:
        answer = client.start_execution(
            stateMachineArn=state_machine_arn,
            name=execution_name(settings.endpoint, lifecycle_id, settings.image),
            input=json.dumps(execution_input(settings, lifecycle_id), sort_keys=True),
        )
    except ClientError as error:  # its code and message: an AccessDenied names the action refused
        raise ExecutionStartError(f"StartExecution of {state_machine_arn}: {error}") from error
    except BotoCoreError as error:
        raise ExecutionStartError(f"StartExecution of {state_machine_arn}: {error}") from error
    return str(answer["executionArn"])
