"""The local stack's state files, each read through its model, and one error for any file that is not
what gco wrote.

- `stack.json` (`StackState`): what `up` started, each part with the pid and start time it was given;
  what `env` prints.
- `region-<R>.json` (`NodeReport`): what a Region's process reports once it serves.
- `front.json` (`FrontReport`): what the global address's process reports once it serves.
- `region-<R>.children` (`RegionChildren`): the process groups a Region's process started (engines,
  nginx), each with its leader's pid and start time.
- `started` (`statelock`): one `Started` a line, each process `up` spawned.

Every pid is a `gco.processes.identity.Started`: from 2 to Linux's PID_MAX_LIMIT with a start time,
so a file naming pid 1, 0, a negative or huge pid, or a value of the wrong type is refused whole
(`StateFileError`, one line naming the file and the field) and nothing it names is signalled. A file
that is not a regular file (a FIFO, a device) is refused before it is opened, as is one larger than
any state file gco writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field, model_validator

from gco.endpoints.admissions import Policy
from gco.global_access.key_store import DEFAULT_KEYS_TABLE
from gco.local.errors import StateFileError
from gco.processes.identity import FIRST_STARTED_PID, Started
from gco.processes.proc import PID_MAX

STATE_FILE = "stack.json"
MAX_STATE_BYTES = 1 << 20  # far above any state file gco writes (a few KB at most)

# The kinds of background process `gco local up` starts; a new kind is one more literal here.
PartKind = Literal["moto", "region", "front"]

M = TypeVar("M", bound=BaseModel)


class Part(BaseModel):
    """One background process of the stack: its kind (and Region), the process as started, URL, log."""

    model_config = ConfigDict(frozen=True, strict=True)

    kind: PartKind
    region: str | None = None
    pid: int = Field(ge=FIRST_STARTED_PID, le=PID_MAX)
    start_ticks: int = Field(ge=0)
    url: str
    log: str

    @model_validator(mode="after")
    def _region_part_names_its_region(self) -> Part:
        if (self.kind == "region") != (self.region is not None):
            raise ValueError("a region part names its Region, and only a region part does")
        return self

    @computed_field  # type: ignore[prop-decorator]
    @property
    def name(self) -> str:
        """What the CLI calls the part: `moto`, `region us-east-1`."""
        return f"{self.kind} {self.region}" if self.region is not None else self.kind

    @property
    def process(self) -> Started:
        return Started(pid=self.pid, start_ticks=self.start_ticks)


class StackState(BaseModel):
    """What `up` started and what `env` prints (`stack.json`)."""

    model_config = ConfigDict(frozen=True, strict=True)

    endpoint_url: str
    table: str
    home_region: str
    regions: list[str]
    evidence_bucket: str
    parts: list[Part]
    invoke_urls: dict[str, str]
    cluster_urls: dict[str, str] = Field(default_factory=dict)  # each Region's stand-in API server
    ca_bundle: str | None = None
    validation_policy: Policy = "off"
    registry: str | None = None  # the registry stand-in's file
    global_url: str | None = None  # the global address in front of every Region's proxy
    keys_table: str = DEFAULT_KEYS_TABLE
    assembly: str | None = None  # the synthesized app the stack runs the functions of
    # The operator's access key where moto enforces IAM (a stack from the app); loopback-only keys of
    # the local moto server, which `gco local env` exports.
    credentials: dict[str, str] = Field(default_factory=dict)
    states_url: str | None = None  # the Step Functions stand-in (a stack from the app)
    rollout_machine: str | None = None  # the rollout state machine's ARN on it


class FrontReport(BaseModel):
    """What the global address's process writes once it serves (`front.json`)."""

    model_config = ConfigDict(frozen=True, strict=True)

    pid: int = Field(ge=FIRST_STARTED_PID, le=PID_MAX)
    url: str


class NodeReport(BaseModel):
    """What a Region's process writes once it serves (`region-<R>.json`)."""

    model_config = ConfigDict(frozen=True, strict=True)

    pid: int = Field(ge=FIRST_STARTED_PID, le=PID_MAX)
    region: str
    proxy_url: str
    invoke_url: str
    api_url: str
    ca_bundle: str | None = None
    # The home Region's, from the app: the Step Functions stand-in and the rollout state machine's ARN.
    states_url: str | None = None
    rollout_machine: str | None = None


class RegionChildren(BaseModel):
    """The process groups a Region's process started and has not stopped (`region-<R>.children`)."""

    model_config = ConfigDict(frozen=True, strict=True)

    groups: list[Started]


def read_text(path: Path) -> str | None:
    """The text of state file `path`; None when there is none.

    Raises:
        StateFileError: it is not a regular file, is too large, or cannot be read as UTF-8 text.
    """
    try:
        if not path.exists():
            return None
        if not path.is_file():
            raise StateFileError(f"{path} is not a regular file: not a state file gco wrote")
        with path.open("rb") as handle:
            data = handle.read(MAX_STATE_BYTES + 1)
    except OSError as error:
        raise StateFileError(f"{path} cannot be read: {error.strerror or error}") from None
    if len(data) > MAX_STATE_BYTES:
        raise StateFileError(f"{path} is larger than any state file gco writes ({MAX_STATE_BYTES} bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise StateFileError(f"{path} is not UTF-8 text: not a state file gco wrote") from None


def refused(path: Path, error: ValidationError) -> StateFileError:
    """The one-line error for a state file its model refuses, naming the first field at fault."""
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "the file"
    message = " ".join(str(first["msg"]).split())
    return StateFileError(
        f"{path} is not a state file gco wrote ({field}: {message}); nothing it names was signalled: "
        "stop those processes yourself if they are gco's, then remove the file"
    )


def read(path: Path, model: type[M]) -> M | None:
    """State file `path` read through `model`; None when there is none.

    Raises:
        StateFileError: the file is not one gco wrote (unreadable, truncated, hostile values).
    """
    text = read_text(path)
    if text is None:
        return None
    try:
        return model.model_validate_json(text)
    except ValidationError as error:
        raise refused(path, error) from None


def write(path: Path, model: BaseModel) -> None:
    """Write state file `path` whole or not at all (a reader never sees half of it)."""
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(model.model_dump_json(indent=2), encoding="utf-8")
    partial.replace(path)
