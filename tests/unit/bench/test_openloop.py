"""Which requests of an open-loop level are due (`openloop.due`), on an injected elapsed time."""

from __future__ import annotations

from gco.bench.clients.openloop import NS, due


def test_every_request_whose_offset_has_come_is_due_from_the_next_one_on() -> None:
    offsets = [0.0, 0.001, 0.001, 0.0025, 0.004]
    assert due(offsets, 0, 0) == 1
    assert due(offsets, 1, int(0.001 * NS) - 1) == 1  # not yet: nothing sent
    assert due(offsets, 1, int(0.001 * NS)) == 3  # the two planned at the same time go together
    assert due(offsets, 3, 10 * NS) == 5  # late: everything left at once
    assert due(offsets, 5, 10 * NS) == 5
    assert due([], 0, NS) == 0
