"""The synthesized app as the local stack runs it: each function of a stack from its asset, under its
own role, with its template's environment, trigger and concurrency.

`DeployedApp` names what every part needs: the cloud assembly, the Python its functions run on (the
runtime's, or this machine's with bundles built for it: gco.local.assembly.synth), the folder that
stands in for the runtime's own packages (`runtime_sdk`), the moto server and the caller's (the
operator's) credentials, with which a function's role is made in the moto server from its template
and assumed, as Lambda assumes it.

`DeployedFunction` is one function ready to invoke: made from its stack, its environment resolved
against the local stack (`Resolver`; `extra` adds what only the local stack knows: the moto server's
URL as `AWS_ENDPOINT_URL`, a stand-in's as `AWS_ENDPOINT_URL_<SERVICE>`), its role's session
credentials, its log under `log_dir`.

Not modelled beyond `invoke`'s own list: the role's session is taken once per `DeployedFunction` for
STS's hour (`iam.SESSION_SECONDS`); Lambda refreshes it before it expires, and a local stack up for
longer than that sees its functions' calls refused as expired.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from gco import aws
from gco.env import ENDPOINT_URL_ENV
from gco.local.assembly.iam import assume, make_role
from gco.local.assembly.invoke import AssetFunction, FunctionRuntime
from gco.local.assembly.reader import CloudAssembly, StackArtifact
from gco.local.assembly.resolve import Resolver
from gco.local.assembly.synth import LOCAL_RECORD, LocalRecord
from gco.local.assembly.template import LambdaFunction, functions
from gco.local.errors import AssemblyError

LAMBDA_PRINCIPAL = "lambda.amazonaws.com"  # the service principal of a function's role's trust policy
SERVICE_ARN = "arn"  # the stand-in service user's ARN, beside its credentials (`make_service_user`)
CREDENTIAL_NAMES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
MAX_SESSION_NAME = 64  # STS's limit on RoleSessionName


def client_as(service: str, region: str, url: str, credentials: Mapping[str, str]) -> Any:
    """A client of `url` signing with `credentials` (the variables Lambda hands a function)."""
    return aws.session().create_client(
        service,
        region_name=region,
        endpoint_url=url,
        aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=credentials.get("AWS_SESSION_TOKEN"),
    )


@dataclass(frozen=True)
class DeployedApp:
    """The assembly and what running its functions takes (see the module's docstring).

    `credentials` are the operator's (`AWS_ACCESS_KEY_ID`, ...), None to use the environment's;
    `lambda_service` the credentials of the IAM user standing in for the Lambda service, which assumes
    each function's role (`make_service_user`; None: the operator assumes them, which works only while
    moto's IAM enforcement is off).
    """

    assembly: CloudAssembly
    runtime: FunctionRuntime
    moto_url: str
    log_dir: Path
    credentials: Mapping[str, str] | None = None
    lambda_service: Mapping[str, str] | None = None

    def client(self, service: str, region: str) -> Any:
        """A client of the moto server as the operator."""
        if self.credentials is None:
            return aws.client(service, region=region, endpoint_url=self.moto_url)
        return client_as(service, region, self.moto_url, self.credentials)

    def role_credentials(self, stack: StackArtifact, function: LambdaFunction, region: str) -> dict[str, str]:
        """The function's role made in the moto server from its template, and a session of it, taken
        as the Lambda service takes it."""
        service = self.lambda_service
        trusted = {LAMBDA_PRINCIPAL: service[SERVICE_ARN]} if service is not None else {}
        arn = make_role(self.client("iam", region), stack, function, trusted)
        sts = client_as("sts", region, self.moto_url, service) if service else self.client("sts", region)
        return assume(sts, arn, str(function.logical_id)[:MAX_SESSION_NAME])


@dataclass
class DeployedFunction:
    """One function of the app, invocable (`invoke`), closed with `close`."""

    app: DeployedApp
    stack: StackArtifact
    function: LambdaFunction
    region: str
    resolver: Resolver
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.environment = {
            name: str(value) for name, value in self.resolver.resolve(self.function.environment).items()
        }
        credentials = self.credentials = self.app.role_credentials(self.stack, self.function, self.region)
        self.app.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.app.log_dir / f"{self.name}.log"
        self._log: IO[str] = self.log_path.open("a", encoding="utf-8")
        variables = {**self.environment, **credentials, ENDPOINT_URL_ENV: self.app.moto_url, **self.extra}
        self.running = AssetFunction(
            self.function, self.app.runtime, environment=variables, region=self.region, log=self._log
        )

    @property
    def name(self) -> str:
        name = self.function.name
        return name if isinstance(name, str) else f"{self.stack.name}-{self.function.logical_id}"

    @property
    def arn(self) -> str:
        return self.running.arn

    def client(self, service: str, region: str | None = None) -> Any:
        """A client of the moto server with the function's role, in `region` (default: its own), for
        what Lambda does as it: reading its mapping's stream, writing to its on-failure destination."""
        return client_as(service, region or self.region, self.app.moto_url, self.credentials)

    def invoke(self, event: Any) -> Any:
        """The function's answer to `event` (`AssetFunction.invoke`).

        Raises:
            FunctionInvokeError: the handler raised, the import failed, it timed out or its environment died.
        """
        return self.running.invoke(event)

    def close(self) -> None:
        self.running.close()
        self._log.close()


OPERATOR = "gco-local-operator"  # the IAM user the local stack's own parts and its CLI sign as
EVERYTHING = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def make_operator(iam: Any) -> dict[str, str]:
    """An IAM user allowed everything, made in the moto server before its IAM enforcement is turned on,
    and its access key as the variables a client reads (`AWS_ACCESS_KEY_ID`, ...): what the local
    stack's own parts and the CLI sign with once every request must carry credentials moto issued."""
    with contextlib.suppress(iam.exceptions.EntityAlreadyExistsException):
        iam.create_user(UserName=OPERATOR)
    iam.put_user_policy(UserName=OPERATOR, PolicyName="everything", PolicyDocument=json.dumps(EVERYTHING))
    key = iam.create_access_key(UserName=OPERATOR)["AccessKey"]
    return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}


LAMBDA_SERVICE_USER = "gco-local-lambda-service"
ASSUME_ONLY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}],
}


def make_service_user(iam: Any) -> dict[str, str]:
    """The IAM user standing in for the Lambda service: it may only assume roles, and only those whose
    trust policy trusts `lambda.amazonaws.com` name it (`iam.trust_for_moto`). Its credentials, with its
    ARN under `SERVICE_ARN`."""
    try:
        arn = str(iam.create_user(UserName=LAMBDA_SERVICE_USER)["User"]["Arn"])
    except iam.exceptions.EntityAlreadyExistsException:
        arn = str(iam.get_user(UserName=LAMBDA_SERVICE_USER)["User"]["Arn"])
    iam.put_user_policy(
        UserName=LAMBDA_SERVICE_USER, PolicyName="assume", PolicyDocument=json.dumps(ASSUME_ONLY)
    )
    key = iam.create_access_key(UserName=LAMBDA_SERVICE_USER)["AccessKey"]
    return {
        "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
        SERVICE_ARN: arn,
    }


# How `gco local up` hands its parts the app: the Lambda service stand-in's credentials (JSON).
LAMBDA_SERVICE_ENV = "GCO_LOCAL_LAMBDA_SERVICE"
RUNTIME_SDK_DIR = "runtime-sdk"  # the runtime's own packages (`runtime_sdk`), in the stack's state directory


def function_python(assembly: CloudAssembly) -> str | None:
    """The Python the assembly's functions run on: the one its local synth recorded (`LocalRecord`:
    bundles built for it), else the functions' runtime's CPython on this machine; None when there is
    neither.

    Raises:
        AssemblyError: the local synth's record cannot be read, or the bundled functions are not of
            one runtime.
    """
    if (assembly.directory / LOCAL_RECORD).is_file():
        return LocalRecord.read(assembly.directory).python
    # the bundled Python functions' runtime (inline ones, CDK's, run no bundle and are not run here)
    runtimes = {
        f.runtime
        for stack in assembly.stacks.values()
        for f in functions(stack).values()
        if f.is_python and f.code is not None
    }
    if len(runtimes) != 1:
        raise AssemblyError(f"{assembly.directory}: bundled functions of {sorted(runtimes)}, not one runtime")
    return FunctionRuntime.find(runtimes.pop())


def app_from_environment(
    directory: Path, moto_url: str, log_dir: Path, packages: Path, environ: Mapping[str, str]
) -> DeployedApp:
    """The app as `gco local up` hands it to a part: the assembly in `directory`, its functions' Python
    (`function_python`), the runtime's packages made by `up`, the operator's credentials and the Lambda
    service stand-in's from `environ`.

    Raises:
        AssemblyError: the assembly cannot be read, or its functions' Python is not on this machine.
    """
    assembly = CloudAssembly.open(directory)
    python = function_python(assembly)
    if python is None:
        raise AssemblyError(
            f"{directory}: no Python for its functions here (synthesize it with `gco local up`)"
        )
    service = environ.get(LAMBDA_SERVICE_ENV)
    credentials = {name: environ[name] for name in CREDENTIAL_NAMES if name in environ}
    return DeployedApp(
        assembly,
        FunctionRuntime(python, packages),
        moto_url,
        log_dir,
        credentials=credentials or None,
        lambda_service=json.loads(service) if service else None,
    )


def make_identities(iam: Any) -> tuple[dict[str, str], dict[str, str]]:
    """The operator's credentials and the Lambda service stand-in's (`make_operator`,
    `make_service_user`), made with `iam` before moto's IAM enforcement is turned on."""
    return make_operator(iam), make_service_user(iam)


@contextlib.contextmanager
def signing_as(credentials: Mapping[str, str]) -> Iterator[None]:
    """This process's AWS clients made meanwhile sign with `credentials` (the operator's, once IAM is
    enforced); the environment's own variables are put back after."""
    saved = {name: os.environ.get(name) for name in CREDENTIAL_NAMES}
    os.environ.update({name: value for name, value in credentials.items() if name in CREDENTIAL_NAMES})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
