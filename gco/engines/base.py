"""What an engine framework is to gco: the one class each framework module fills in.

A framework is everything gco does differently by the `framework` of a spec: how a pod launches the
engine (arguments, environment, ports), how a client asks it and reads its answer (streamed too),
which metric says its queue, how its start-up log and launch command show its configuration (the
bench's hard gates), and how the validation matrix checks what it serves. The rest of gco asks the
registry (`gco.engines`) for a framework by name and never compares framework names itself.

Standard library only: the fake engine imports this on every start, once per bench cell and local
replica, and pydantic's import would be most of that start.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The bench's hard-gate evidence kinds, as `LaunchFacts` and the log gates name them.
OFFLOAD = "offload"
GRAPHS_OFF = "cuda_graphs_off"
ATTENTION_FALLBACK = "attention_fallback"
FACT_KINDS = (OFFLOAD, GRAPHS_OFF, ATTENTION_FALLBACK)
# The OpenAI chat completions API, which every framework here serves: vLLM's and SGLang's OpenAI
# servers, and TGI's Messages API (since TGI 1.4.0: huggingface.co/docs/text-generation-inference,
# "Messages API"). The server frames the messages with the model's own chat template, which an
# instruct model needs: given a bare question as a plain completion prompt, SmolLM2-135M-Instruct
# ends its answer at once (0 tokens) for most questions; as a user turn it answers.
CHAT_PATH = "/v1/chat/completions"


def chat_answer_text(body: Any) -> str | None:
    """The text of an OpenAI answer: a chat answer's `choices[0].message.content`, or a completion's
    `choices[0].text` (None: the answer is of neither shape)."""
    try:
        choice = body["choices"][0]
        text = choice["message"]["content"] if "message" in choice else choice["text"]
    except (KeyError, IndexError, TypeError):
        return None
    return text if isinstance(text, str) else None


def chat_event_text(event: Mapping[str, Any]) -> str:
    """The text one OpenAI streamed chunk adds: a chat chunk's `delta.content`, a completion's `text`."""
    choices = event.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    delta = choice.get("delta")
    piece = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return str(piece or "")


@dataclass(frozen=True)
class Launch:
    """What a serving pod asks of its engine: the model (a Hub id or a local directory; None: the
    image's own), the revision to pin (None: none), the port and the GPUs to shard over."""

    model: str | None
    revision: str | None
    port: int
    gpus: int


@dataclass(frozen=True)
class LaunchRead:
    """The model and revision a launched container's arguments and environment name ("" if none)."""

    model: str
    revision: str


@dataclass(frozen=True)
class ConfigBlock:
    """An engine's own configuration block in its start-up log: engine generation, version, settings."""

    settings: dict[str, str]
    engine: str | None = None
    version: str | None = None


@dataclass(frozen=True)
class ArgumentDump:
    """The engine's dump of its own arguments (self-reported); `lists_all`: absent means default."""

    values: dict[str, str]
    lists_all: bool


@dataclass(frozen=True)
class LogGates:
    """CUDA graphs on and GPU offload as the log's configuration decides them (None: undecided)."""

    cuda_graphs: bool | None = None
    gpu_offload: bool | None = None
    evidence: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class EngineFlags:
    """The real-engine flags a stand-in engine accepts and shows in its start-up log."""

    model: str
    port: int
    enforce_eager: bool = False
    cpu_offload_gb: float = 0.0
    disable_cuda_graph: bool = False
    enable_hierarchical_cache: bool = False
    cuda_graphs: str | None = None


def flag_value(args: Sequence[str], flag: str) -> str:
    """The value after `flag` in `args` ("" when it is absent or last)."""
    for index, arg in enumerate(args[:-1]):
        if arg == flag:
            return str(args[index + 1])
    return ""


class Framework(ABC):
    """One engine framework. Class attributes are its fixed names; methods its request shapes."""

    name: str  # the spec's `framework` value
    # Whether it serves the OpenAI chat API at `CHAT_PATH` (every built-in framework does); a
    # framework registered by a module is asked in its own completion shape unless it says so.
    chat_api: bool = False
    label: str  # as people write it
    default_port: int  # where its image listens unless told
    # The Prometheus gauge of requests waiting in its queue (queue_depth autoscaling); None: none.
    queue_metric: str | None = None
    # Its program or module in a launch command (the bench reads a harness-started engine's family).
    program: re.Pattern[str] | None = None
    # Start-up log lines naming the attention backend (group `b`), backends that are fallbacks, and
    # lines saying the engine fell back.
    backend_lines: tuple[re.Pattern[str], ...] = ()
    fallback_backends: tuple[str, ...] = ()
    fallback_lines: tuple[re.Pattern[str], ...] = ()
    # Start-up log lines naming a setting the engine did not know (group `k`).
    unknown_lines: tuple[re.Pattern[str], ...] = ()
    # The configuration block's setting that names the attention backend, if it has one.
    backend_setting: str | None = None
    # Its model-info request (the validation matrix) and the answer field that holds the text.
    model_info_path: str = ""
    answer_field: str = ""

    # ----- launch ---------------------------------------------------------------------------------
    @abstractmethod
    def launch_args(self, launch: Launch) -> list[str]:
        """The container arguments that launch it (when the spec gives no `args`)."""

    @abstractmethod
    def launch_env(self, launch: Launch) -> dict[str, str]:
        """The container environment that configures it."""

    @abstractmethod
    def read_launch(self, args: Sequence[str], env: Mapping[str, str]) -> LaunchRead | None:
        """The model and revision a container launched as `launch_args`/`launch_env` serves; None when
        the container does not carry this framework's launch."""

    # ----- requests and answers -------------------------------------------------------------------
    @abstractmethod
    def completion(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        """(path, JSON body) of one greedy, unstreamed completion request."""

    @abstractmethod
    def streamed(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        """(path, JSON body) of the same request answered as server-sent events."""

    def default_request(
        self, model: str, prompt: str, max_tokens: int, *, stream: bool = False
    ) -> tuple[str, dict[str, Any]]:
        """(path, JSON body) of what `gco inference invoke` sends by default: a chat completion
        where the framework serves the chat API (`chat_api`), its own completion otherwise."""
        if self.chat_api:
            return (self.chat_streamed if stream else self.chat)(model, prompt, max_tokens)
        return (self.streamed if stream else self.completion)(model, prompt, max_tokens)

    def chat(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        """(path, JSON body) of one greedy, unstreamed chat completion: `prompt` as the user's turn
        (`CHAT_PATH`, the same for every framework); `model` may be empty (the served one)."""
        body: dict[str, Any] = {
            "model": model or self.name,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": False,
        }
        return CHAT_PATH, body

    def chat_streamed(self, model: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any]]:
        """(path, JSON body) of the same chat completion answered as server-sent events."""
        path, body = self.chat(model, prompt, max_tokens)
        return path, {**body, "stream": True}

    @abstractmethod
    def answer_text(self, body: Any) -> str | None:
        """The generated text of an unstreamed answer (None: the answer is not of that shape)."""

    @abstractmethod
    def event_text(self, event: Mapping[str, Any]) -> str:
        """The text one streamed event (a JSON object, not an error) adds."""

    @abstractmethod
    def served_model(self, body: Any) -> tuple[list[str], str | None]:
        """The model ids and the revision (None: not reported) its model-info answer names."""

    # ----- logs and launch commands (the bench) ---------------------------------------------------
    def config_block(self, line: str, following: Sequence[str]) -> ConfigBlock | None:
        """The configuration block `line` opens (`following`: the lines after it), or None."""
        return None

    def argument_dump(self, line: str) -> ArgumentDump | None:
        """The engine's self-reported argument dump on `line`, or None."""
        return None

    def log_gates(self, block: ConfigBlock | None, dumps: Sequence[ArgumentDump]) -> LogGates:
        """The gates its logged configuration decides (`block` None: only the dumps speak)."""
        return LogGates()

    def launch_facts(self, options: Mapping[str, list[str]], env: Mapping[str, str]) -> dict[str, list[str]]:
        """Gate evidence (FACT_KINDS -> entries) in a launch's options (`--flag` -> values) and env."""
        return {kind: [] for kind in FACT_KINDS}

    # ----- the fake engine's start-up log ---------------------------------------------------------
    def startup_values(self, flags: EngineFlags) -> dict[str, str]:
        """The `${...}` values of its start-up log template for a stand-in launched with `flags`."""
        return {"model": flags.model, "port": str(flags.port)}

    def startup_kept(self, line: str, flags: EngineFlags) -> bool:
        """Whether a template line stays in the log of a stand-in launched with `flags`."""
        return True

    # ----- the validation matrix ------------------------------------------------------------------
    def matrix_launch(self, model: str, revision: str, port: int) -> tuple[list[str], dict[str, str]]:
        """(arguments, environment) the live validation matrix deploys it with: its own launch."""
        launch = Launch(model=model, revision=revision, port=port, gpus=1)
        return self.launch_args(launch), self.launch_env(launch)

    def launched_revision(self, args: Sequence[str], env: Mapping[str, str]) -> str | None:
        """The revision a launched container pins (None: none, or not this framework's launch)."""
        read = self.read_launch(args, env)
        return (read.revision or None) if read is not None else None
