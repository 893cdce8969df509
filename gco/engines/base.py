"""What an engine framework is to gco: the one class each framework module fills in.

A framework is how a pod launches the engine (arguments, environment, ports, and reading that launch
back), how a client asks it and reads its answer (streamed too), and which metric says its queue:
what the reconciler, invoke and the local stack need. The rest of gco asks the registry
(`gco.engines`) for a framework by name and never compares framework names itself. How the bench
reads its logs, how the fake engine logs as it and how the matrix checks it live with those parts,
each in a registry keyed by framework name (`registry.entry`).

Standard library only: the fake engine imports this on every start, once per bench cell and local
replica, and pydantic's import would be most of that start.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
