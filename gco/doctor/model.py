"""What `gco doctor` reports: one check per prerequisite, with its fix."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

# ok: holds. fail: a deploy would fail (or a GPU pod never schedule) until fixed. warn: worth a
# look, but a deploy can succeed (the exit status ignores it).
Status = Literal["ok", "fail", "warn"]
LOCAL = "local"
ACCOUNT = "account"


class Check(BaseModel):
    """One check's outcome. `scope` is `local`, `account` (global services) or a Region."""

    model_config = ConfigDict(frozen=True)

    name: str
    scope: str
    status: Status
    detail: str
    fix: str = ""


class Report(BaseModel):
    """Every check of a run, in the order they ran."""

    model_config = ConfigDict(frozen=True)

    checks: list[Check]

    @property
    def ok(self) -> bool:
        """True when no check failed (warnings do not fail a run)."""
        return all(check.status != "fail" for check in self.checks)

    def lines(self) -> list[str]:
        """One line per check for people: status, scope, name, detail, and the fix when not ok."""
        width = max((len(c.scope) for c in self.checks), default=0)
        out = []
        for check in self.checks:
            line = f"{check.status.upper():4} {check.scope:<{width}} {check.name}: {check.detail}"
            out.append(f"{line} -> fix: {check.fix}" if check.fix and check.status != "ok" else line)
        return out


def ok(name: str, scope: str, detail: str) -> Check:
    return Check(name=name, scope=scope, status="ok", detail=detail)


def fail(name: str, scope: str, detail: str, fix: str) -> Check:
    return Check(name=name, scope=scope, status="fail", detail=detail, fix=fix)


def warn(name: str, scope: str, detail: str, fix: str) -> Check:
    return Check(name=name, scope=scope, status="warn", detail=detail, fix=fix)
