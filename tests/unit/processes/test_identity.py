"""A process gco started is a pid from 2 to PID_MAX with its start time; a pid names it only while /proc
shows the same start time."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from pydantic import ValidationError

from gco.processes.identity import Started, check, record, running
from gco.processes.proc import PID_MAX, parse_stat, read_stat


@pytest.mark.parametrize("pid", [1, 0, -1, -4242, PID_MAX + 1, 2**63, "1234", 12.0, True, None], ids=repr)
def test_a_pid_gco_cannot_have_started_is_refused(pid: Any) -> None:
    with pytest.raises(ValidationError):
        Started.model_validate({"pid": pid, "start_ticks": 5})
    with pytest.raises(ValidationError):
        Started.model_validate_json(
            f'{{"pid": {pid if not isinstance(pid, str) else repr(pid)}, "start_ticks": 5}}'
        )


@pytest.mark.parametrize("ticks", [-1, "7", 1.5, None])
def test_a_start_time_that_is_no_count_of_ticks_is_refused(ticks: Any) -> None:
    with pytest.raises(ValidationError):
        Started.model_validate({"pid": 4242, "start_ticks": ticks})


def test_a_stat_line_is_read_after_the_last_parenthesis() -> None:
    line = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 987654 0 0"
    stat = parse_stat(4242, line)
    assert stat is not None and (stat.state, stat.ppid, stat.pgid, stat.session) == ("S", 1, 4242, 4242)
    assert stat.start_ticks == 987654
    assert parse_stat(4242, "4242 (trunc) S 1 2") is None and parse_stat(4242, "") is None


def test_a_pid_names_the_recorded_process_only_while_its_start_time_matches() -> None:
    me = record(os.getpid())
    assert check(me) == "ours" and running(me)
    assert check(me.model_copy(update={"start_ticks": me.start_ticks + 1})) == "reused"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    recorded = record(child.pid)
    child.wait(timeout=30)  # reaped: the pid names nothing now (or, much later, another process)
    assert check(recorded) in ("gone", "reused") and not running(recorded)
    assert read_stat(0) is None and read_stat(-1) is None and read_stat(PID_MAX + 1) is None
