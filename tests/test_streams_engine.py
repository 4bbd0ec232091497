"""Both stream mappers over runs played live through the engine on moto (the Host's routes and
the run-step worker): each run's subscription events map to craze events that validate against
the seed schema and to a valid AG-UI stream. `STREAMS_RECORD=1` re-records tests/data/streams."""

from __future__ import annotations

import os
from typing import Any

import pytest
from helpers.streams import (
    DATA,
    SCENARIOS,
    assert_asks_paired,
    assert_tool_rows,
    check_agui,
    check_craze,
    log_events,
    run_of,
)
from threads_aws.streams import AgUiMapper, CrazeMapper


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_live_run_maps_to_valid_streams(aws: Any, name: str) -> None:
    runs = SCENARIOS[name](aws)
    raw = runs.export()
    if os.environ.get("STREAMS_RECORD"):
        DATA.mkdir(parents=True, exist_ok=True)
        (DATA / f"{name}.jsonl").write_bytes(raw)
    events = log_events(raw)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    for k in range(sum(e["type"] == "user_input" for e in events)):
        run = run_of(events, k)
        craze, agui = CrazeMapper(), AgUiMapper()
        data = check_craze([o for e in run for o in craze.feed({"kind": "event", "event": e})])
        assert data[0]["type"] == "turn" and data[-1]["type"] == "turn"
        assert_asks_paired(data)
        assert_tool_rows(data)
        ag = check_agui([o for e in run for o in agui.feed({"kind": "event", "event": e})])
        assert ag[0]["type"] == "RUN_STARTED" and ag[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
