"""`SecretReader` over AWS Secrets Manager: the Regional reconciler's way to read the values of the
secrets an endpoint spec names (`gco.secrets.endpoint_secrets` holds the references, the allowed list and
the Kubernetes Secret; this module is its one AWS adapter). Service errors are converted here into
`SecretReadError`, retryable or not; no value reaches a log, even at DEBUG level.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco.secrets.endpoint_secrets import SecretReadError, SecretValue

# Error codes of GetSecretValue that a retry cannot cure (docs.aws.amazon.com/secretsmanager/latest/
# apireference/API_GetSecretValue.html#API_GetSecretValue_Errors, and IAM's AccessDeniedException).
_PERMANENT = frozenset(
    {"ResourceNotFoundException", "AccessDeniedException", "InvalidRequestException", "DecryptionFailure"}
)


class _HideSecretBodies(logging.Filter):
    """Drops botocore's DEBUG record of a response body (`botocore/parsers.py`: "Response body:") while
    this thread reads a secret, so a DEBUG log level never writes a secret's value to a log."""

    def __init__(self) -> None:
        super().__init__()
        self.local = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not (getattr(self.local, "reading", False) and str(record.msg).startswith("Response body"))


_HIDE = _HideSecretBodies()
_PARSER_LOGGER = "botocore.parsers"


class SecretsManagerReader:
    """`SecretReader` over boto3's `secretsmanager` client; an ARN is read in its own Region.

    Parameters:
        client_for: a client of the given Region (`gco.aws.client('secretsmanager', region=...)`).
        home_region: where a secret named without an ARN is read.
    """

    def __init__(self, client_for: Callable[[str], Any], home_region: str) -> None:
        self._client_for = client_for
        self._home = home_region
        self._clients: dict[str, Any] = {}
        if _HIDE not in logging.getLogger(_PARSER_LOGGER).filters:
            logging.getLogger(_PARSER_LOGGER).addFilter(_HIDE)

    def read(self, secret_id: str) -> SecretValue:
        """The secret's current value, read in the Region its ARN names (else the home Region).

        Raises:
            SecretReadError: the service refused (retryable unless the code is permanent), could not
                be reached (retryable), or the secret holds binary.
        """
        region = secret_id.split(":")[3] if secret_id.startswith("arn:") else self._home
        client = self._clients.setdefault(region, self._client_for(region))
        _HIDE.local.reading = True
        try:
            answer = client.get_secret_value(SecretId=secret_id)
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", "unknown"))
            raise SecretReadError(f"secret {secret_id}: {code}", retryable=code not in _PERMANENT) from None
        except BotoCoreError as error:
            raise SecretReadError(f"secret {secret_id}: {type(error).__name__}", retryable=True) from None
        finally:
            _HIDE.local.reading = False
        if "SecretString" not in answer:
            raise SecretReadError(f"secret {secret_id}: holds binary, not a string", retryable=False)
        return SecretValue(str(answer["SecretString"]), str(answer["VersionId"]))
