"""A run's stream in other event formats: pure mappers from the run subscription's messages
(semantics §5 `SseMessage`: committed log events, transient deltas and `retry_wait` status, the
final `RunOutcome`) to craze events (`craze`), AG-UI protocol events (`agui`) and AI SDK v5 UI
message stream chunks (`aisdk`).

Pure: no I/O, standard library and `core/` only, so the stream route, the console and the CLI
share them. The mappers share one framing (`frames`):

- fed in log order, each committed event yields a *group* of 0..n outputs; the outputs that are
  a function of the committed log alone are *stable* and numbered within the group; the SSE id
  of a group's last output is the event's seq (`"17"`), of an earlier stable output
  `"<seq>.<index>"` (`"17.0"`); transient outputs (deltas, status) carry no id;
- `Mapper.resumed(events, cursor)` rebuilds a mapper from the events up to the cursor and
  returns only what follows it (plus, for AG-UI and the AI SDK, the preamble a new connection needs), so a
  resumed stream has no gap and no duplicate committed output;
- an event at or below the last seq fed is ignored, so an overlapping re-read emits nothing twice.
"""

from .agui import AgUiMapper  # noqa: F401
from .aisdk import AiSdkMapper
from .craze import CrazeMapper
from .frames import Cursor, Mapper, Out, parse_cursor

__all__ = ["AgUiMapper", "AiSdkMapper", "CrazeMapper", "Cursor", "Mapper", "Out", "parse_cursor"]
