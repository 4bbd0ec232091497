"""Cron expressions with an IANA time zone, pure (no clock reads): parsed once, matched per
minute in the zone's local time, and spelled for EventBridge Scheduler.

Grammar: five fields ``minute hour day-of-month month day-of-week`` (the crontab order), each
``*``, a number, a range ``a-b``, a step ``*/n`` or ``a-b/n``, or a comma list of those; months
may be ``JAN``-``DEC``, days of week ``SUN``-``SAT`` or ``0``-``6`` (0 = Sunday, 7 also Sunday).
EventBridge cannot restrict both day-of-month and day-of-week, so an expression that does is
refused (the same expression must mean the same instants here and there).

Occurrences are found by walking UTC minutes and matching each one's local wall time: a local
time the zone skips (spring forward) has no occurrence, one it repeats (fall back) fires once
per UTC minute that shows it, as EventBridge Scheduler documents for its cron schedules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MINUTE_MS = 60_000
MONTHS = {m: i + 1 for i, m in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())}
DAYS = {d: i for i, d in enumerate("SUN MON TUE WED THU FRI SAT".split())}
_EB_DAYS = "SUN MON TUE WED THU FRI SAT".split()
FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
)
_ITEM = re.compile(r"(\*|[0-9A-Z]+(?:-[0-9A-Z]+)?)(?:/([0-9]+))?\Z")
MAX_SCAN_MINUTES = 7 * 24 * 60  # one walk covers at most a week


class CronError(ValueError):
    pass


def zone(name: str) -> ZoneInfo:
    try:
        return _zone(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronError(f"unknown IANA time zone {name!r}") from exc


@lru_cache(maxsize=64)
def _zone(name: str) -> ZoneInfo:
    if not name or name.startswith(("/", ".")) or ".." in name:
        raise ValueError(name)
    return ZoneInfo(name)


def _value(tok: str, name: str, lo: int, hi: int) -> int:
    names = MONTHS if name == "month" else DAYS if name == "day-of-week" else {}
    if tok in names:
        return names[tok]
    if not tok.isdigit():
        raise CronError(f"{name}: {tok!r} is not a number")
    v = int(tok)
    if not lo <= v <= hi:
        raise CronError(f"{name}: {v} is outside {lo}-{hi}")
    return v


def _field(text: str, name: str, lo: int, hi: int) -> frozenset[int] | None:
    """The values a field allows, or None for ``*`` (unrestricted)."""
    if text == "*":
        return None
    out: set[int] = set()
    for part in text.split(","):
        m = _ITEM.match(part)
        if m is None:
            raise CronError(f"{name}: cannot read {part!r}")
        span, step = m.group(1), int(m.group(2)) if m.group(2) else 1
        if step < 1:
            raise CronError(f"{name}: step must be at least 1")
        if span == "*":
            a, b = lo, hi
        elif "-" in span:
            x, y = span.split("-", 1)
            a, b = _value(x, name, lo, hi), _value(y, name, lo, hi)
            if a > b:
                raise CronError(f"{name}: range {span} runs backwards")
        else:
            a = b = _value(span, name, lo, hi)
            if m.group(2):
                b = hi
        out.update(range(a, b + 1, step))
    if name == "day-of-week" and 7 in out:
        out = (out - {7}) | {0}
    return frozenset(out)


@dataclass(frozen=True)
class Cron:
    text: str
    minutes: frozenset[int] | None
    hours: frozenset[int] | None
    days: frozenset[int] | None
    months: frozenset[int] | None
    weekdays: frozenset[int] | None  # 0 = Sunday

    def matches_local(self, t: datetime) -> bool:
        return (
            (self.minutes is None or t.minute in self.minutes)
            and (self.hours is None or t.hour in self.hours)
            and (self.days is None or t.day in self.days)
            and (self.months is None or t.month in self.months)
            and (self.weekdays is None or (t.isoweekday() % 7) in self.weekdays)
        )

    def occurrences(self, after_ms: int, upto_ms: int, tz: str) -> Iterator[int]:
        """Occurrence instants (UTC ms, minute-aligned) in (after_ms, upto_ms], oldest first;
        at most a week is walked (older ones are not looked for)."""
        z = zone(tz)
        start = (max(after_ms, upto_ms - MAX_SCAN_MINUTES * MINUTE_MS) // MINUTE_MS + 1) * MINUTE_MS
        for at in range(start, upto_ms + 1, MINUTE_MS):
            if self.matches_local(datetime.fromtimestamp(at / 1000, UTC).astimezone(z)):
                yield at

    def eventbridge(self) -> str:
        """The same schedule as an EventBridge Scheduler ``cron(...)`` expression."""
        m, h, dom, mon, dow = (
            _eb_steps(f, lo) for f, (_, lo, _hi) in zip(self.text.split(), FIELDS, strict=True)
        )
        if dow == "*":
            dow = "?"
        else:
            dom = "?" if dom == "*" else dom
            dow = ",".join(_EB_DAYS[d] for d in sorted(self.weekdays or ()))
        return f"cron({m} {h} {dom} {mon} {dow} *)"


def _eb_steps(field: str, lo: int) -> str:
    """``*/n`` as EventBridge spells it (``<first>/n``)."""
    return ",".join(f"{lo}/{p[2:]}" if p.startswith("*/") else p for p in field.split(","))


def parse(text: str) -> Cron:
    parts = text.upper().split()
    if len(parts) != 5:
        raise CronError("a cron expression has five fields: minute hour day-of-month month day-of-week")
    sets = [_field(p, name, lo, hi) for p, (name, lo, hi) in zip(parts, FIELDS, strict=True)]
    if sets[2] is not None and sets[4] is not None:
        raise CronError("restrict day-of-month or day-of-week, not both (EventBridge Scheduler)")
    return Cron(" ".join(parts), *sets)
