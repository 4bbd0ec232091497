"""Schedules (semantics.md §5, Schedules): cron occurrences that start runs on a thread.

- ``cron``: the expressions (pure): parse, occurrences in an IANA zone, EventBridge's spelling;
- ``service``: create / list / delete a thread's schedules (the add-only routes) and fire an
  occurrence (reserve, then decide under the thread writer);
- ``ticker``: the local stand-in for EventBridge Scheduler (`threads-aws dev`), same code path.
The rows: `store.schedules` (definitions), `store.schedule_occurrences` (reservations); the
EventBridge calls: `store.scheduler`.
"""
