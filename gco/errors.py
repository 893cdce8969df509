"""The root of every gco exception, and the exit status each kind maps to.

Each package has its own root below `GcoError`, drawn with its tree in the package's `errors`
module; a module directly in `gco` (or in a package with no `errors` module) draws its errors here.
The CLI only needs `exit_code`: 2 for bad input, 1 for a runtime failure.

    GcoError                       exit 1
    ├── GcoInputError              bad input from a user or a caller: nothing was changed (exit 2)
    │   ├── ConfigError            a `cdk.json` context value is invalid (`gco.deployment.config`)
    │   └── EventFilterError       a filter Lambda refuses or never matches (`gco.deployment.event_filter`)
    ├── EndpointError              the endpoint store and models (`gco.endpoints.errors`)
    ├── ReconcileError             the reconcilers and their clusters (`gco.reconcile.errors`)
    ├── MatrixError                the live validation matrix (`gco.validation.errors`)
    ├── BenchError                 benchmark rounds and serving (`gco.bench.errors`)
    ├── EvidenceError              evidence records and stores (`gco.evidence.errors`)
    ├── DoctorError                `gco doctor` (`gco.doctor.errors`)
    ├── LocalError                 the embedded local stack (`gco.local.errors`)
    ├── ProcessesError             the process library (`gco.processes.errors`)
    ├── SecretReadError            a secret an endpoint names cannot be read (`gco.secrets.endpoint_secrets`)
    ├── NotServingError            the endpoint does not run in the Region asked (`gco.inference.invoke`)
    ├── InvokeFailedError          a request could not be sent, or no way in is known (`gco.inference.invoke`)
    ├── WaitTimeoutError           an awaited condition did not hold in time (`gco.waiting`)
    └── OutputError                the command's output could not be written: closed, full (`gco.cli.output`)

Foreign errors (botocore, httpx, Kubernetes answers, pydantic) are converted where they are met, with
`raise ... from`; `tests/unit/test_error_trees.py` holds the rule.
"""

from __future__ import annotations


class GcoError(Exception):
    """Base of all gco errors; `exit_code` is what the CLI exits with."""

    exit_code: int = 1


class GcoInputError(GcoError):
    """Bad input from a user or a caller: nothing was changed."""

    exit_code = 2

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)
