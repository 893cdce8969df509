"""The runner's model token (a Hugging Face token for gated models): read from AWS Secrets Manager.

`cdk.json` names the secret (`runner.model_token_secret`, and `runner.model_token_key` for one key of
a JSON secret); the runner stack passes the name, never the value, as `GCO_MODEL_TOKEN_SECRET` /
`GCO_MODEL_TOKEN_KEY`, and lets the instance role read that secret only. At start the runner reads
it once and puts it in its own environment as `HF_TOKEN` (the variable vLLM and TGI read), so a run
manifest passes it on to an engine by name (`"env": {"HF_TOKEN": null}`: inherited, recorded as
null) and the value is in no job, file, evidence record or log line. A failure names the secret and
Secrets Manager's error code, never a value.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco.env import MODEL_TOKEN_ENV, MODEL_TOKEN_KEY_ENV, MODEL_TOKEN_SECRET_ENV
from gpu_runner.runner import RunnerError


def load_model_token(secretsmanager: Any, environ: MutableMapping[str, str]) -> bool:
    """Put the named secret's value in `environ[HF_TOKEN]`; False (nothing done) when none is named.

    Raises:
        RunnerError: the secret cannot be read, is binary, or lacks the named key.
    """
    name = environ.get(MODEL_TOKEN_SECRET_ENV)
    if not name:
        return False
    try:
        answer = secretsmanager.get_secret_value(SecretId=name)
    except ClientError as error:
        code = error.response.get("Error", {}).get("Code", "error")
        raise RunnerError(f"model token secret {name!r}: {code}") from None
    except BotoCoreError as error:
        raise RunnerError(f"model token secret {name!r}: {type(error).__name__}") from None
    value = answer.get("SecretString")
    if not isinstance(value, str):
        raise RunnerError(f"model token secret {name!r} holds no string")
    key = environ.get(MODEL_TOKEN_KEY_ENV)
    if key:
        value = _json_key(name, value, key)
    environ[MODEL_TOKEN_ENV] = value
    return True


def _json_key(name: str, text: str, key: str) -> str:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        raise RunnerError(f"model token secret {name!r} is not JSON, so it has no key {key!r}") from None
    value = document.get(key) if isinstance(document, dict) else None
    if not isinstance(value, str):
        raise RunnerError(f"model token secret {name!r} has no string key {key!r}")
    return value
