"""The CLI for people: `threads-aws run|follow|show|approve|deny|answer|resolve|cancel|fork|
export|threads` against a host URL and key, over `threads_aws_client`, rendered with rich.

Dev/client tooling (not in the Lambda layer). `commands` registers the subcommands with the
standard library only; the client, rich and the views load when a subcommand runs.

Exit status (also in `threads-aws --help`):
  0   ok; for run/follow: the run completed
  1   the host refused the request (`error <code>: <message>` on stderr), or there was nothing
      to act on (no pending approval, no open question)
  2   usage or local configuration
  3   internal error
  4   the host could not be reached (after retries)
  5   not available on this host (a route it does not serve yet)
  10  the run failed             11  the run is parked (waiting: approval, answer, resolution)
  12  the run was cancelled      13  the run's budget is exhausted      14  handed off
  130 interrupted (Ctrl-C): the run goes on; `threads-aws follow T RUN` picks it up again
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_UNREACHABLE = 4
EXIT_NOT_SERVED = 5
EXIT_FAILED = 10
EXIT_PARKED = 11
EXIT_CANCELLED = 12
EXIT_BUDGET = 13
EXIT_HANDED_OFF = 14
EXIT_INTERRUPTED = 130

OUTCOME_EXIT = {
    "completed": EXIT_OK,
    "failed": EXIT_FAILED,
    "parked": EXIT_PARKED,
    "cancelled": EXIT_CANCELLED,
    "budget_exhausted": EXIT_BUDGET,
    "handed_off": EXIT_HANDED_OFF,
}

EPILOG = (
    "exit status (host commands): 0 ok/completed, 1 refused by the host, 2 usage, 3 internal, "
    "4 host unreachable, 5 not served by this host, 10 run failed, 11 parked (waiting), "
    "12 cancelled, 13 budget exhausted, 14 handed off, 130 interrupted"
)


def exit_code(outcome: Mapping[str, Any]) -> int:
    return OUTCOME_EXIT.get(str(outcome.get("status")), EXIT_INTERNAL)
