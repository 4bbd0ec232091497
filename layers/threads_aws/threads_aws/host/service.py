"""`Host`: the library every route calls (semantics.md §4-5), pure of HTTP.

Each method takes the authenticated Principal and answers a contract value or raises
`ApiError`/`LogError` with one of its route's codes. Rules that hold on every route:

- tenancy: another tenant's thread (or a branch of another thread) is `not_found`;
- controls append with `Writer` under `View.writer_epoch()` (no lease of their own), so they land
  while a worker holds the lease mid-step; a lost head race re-loads and re-decides (`base`);
- a decision, answer, resolution, cancel or new run wakes the branch (one run step enqueued).

The routes by concern: `runs` (start a run, find one), `controls` (approvals, answers, parked
effects, cancel, settings, mode; who may decide: `authority`), `reads` (timeline, branches,
approvals), `forks` (fork points, fork), `steering` (steer, stop when idle; ours), `redaction`
(forget a span of a tool result; ours), `listing` (the tenant's threads, a thread's summary;
ours), `deletion` (delete a thread; ours).
"""

from __future__ import annotations

from .controls import Controls
from .deletion import Deletion
from .forks import Forks
from .listing import Listing
from .reads import Reads
from .redaction import Redactions
from .runs import Runs
from .steering import Steering


class Host(Runs, Controls, Reads, Forks, Steering, Listing, Redactions, Deletion):
    """Built by `services.Services.host()`: Host(stores, writer, steps, agents, clock)."""


__all__ = ["Host"]
