"""Redaction of secret-looking values before anything reaches a log, a record or a report.

A value is secret-looking when its name says so (TOKEN, SECRET, KEY...) or its shape does (hf_, AKIA, sk-).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|CREDENTIAL|PRIVATE|AUTH)", re.IGNORECASE
)
SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|eyJ[A-Za-z0-9_-]{20,})"
)
REDACTED = "<redacted>"


def looks_secret(name: str, value: str | None) -> bool:
    """True when the name or the value looks like a credential."""
    return bool(SECRET_NAME.search(name)) or (value is not None and bool(SECRET_VALUE.search(value)))


def redact_env(env: Mapping[str, str | None]) -> dict[str, str | None]:
    """The env with secret-looking values replaced; None (inherit) stays None."""
    return {k: (REDACTED if v is not None and looks_secret(k, v) else v) for k, v in env.items()}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """argv with secret-looking flag values (`--api-key X`, `--token=X`) and token-shaped words replaced."""
    out: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _ = word.partition("=")
        if word.startswith("-") and SECRET_NAME.search(flag.replace("-", "_")):
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(word)
                hide_next = True
            continue
        out.append(SECRET_VALUE.sub(REDACTED, word))
    return out


def redact_text(text: str) -> str:
    """Free text with token-shaped substrings replaced."""
    return SECRET_VALUE.sub(REDACTED, text)
