"""An example Lambda tool (`add_expense` of the demo agent), exactly once per effect key:
threads_aws.example_tools.add_expense (Powertools Idempotency on `effect_key` + a ledger row
written once)."""

from __future__ import annotations

import os

from threads_aws.example_tools.add_expense import make_handler

handler = make_handler(os.environ.get("TOOL_EXAMPLE_TABLE", ""))
