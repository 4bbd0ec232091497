"""Model fallback and its revert (semantics §4 "Retries, fallback, settings"): pure functions of
the fold; `engine.retry` decides when, this module says to what.

The chain is the thread's pinned `policy.fallback` (ModelSettings[], pinned from the agent's
`fallback_models` at thread start, so a later agents file never changes a running thread). A
fallback moves to the entry after the current settings (after the one equal to them, else after
the one naming the same model; from the primary, to the first). An entry whose model is not in
`policy.models` (when the policy lists models) is skipped: rule 18 would refuse it.

`fallback_scope: turn` reverts when the turn that fell back has ended: the next decision of the
worker appends `settings_changed{reason: revert, settings: <those before the fallback>,
cause_event_id: <the first fallback>}` (actor host), before any new request (rule 18 holds: no
attempt awaits then). A user's settings change after a fallback cancels the revert (the fold
forgets the fallback). `thread` keeps the fallback settings.

Render v1 follows by itself: a settings_changed starts a new epoch, whose line 0 (and declared
prefix, C7) the renderer re-renders; the ModelSettings carry `reasoning_carryover` (`omit_prior`
for another provider's adapter: its reasoning parts can't be sent back), and the revert restores
the earlier epoch's settings as they were.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.fold import Fold, epoch_settings
from . import retry


def chain(f: Fold) -> list[dict[str, Any]]:
    pinned = f.policy.get("fallback")
    return [dict(s) for s in pinned] if isinstance(pinned, list) else []


def _same_model(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    if not a or not b:
        return False
    ma, mb = a.get("model") or {}, b.get("model") or {}
    return bool(ma.get("provider") == mb.get("provider") and ma.get("name") == mb.get("name"))


def _listed(f: Fold, settings: Mapping[str, Any]) -> bool:
    models = f.policy.get("models")
    if models is None:
        return True
    m = settings["model"]
    return any(x["provider"] == m["provider"] and x["name"] == m["name"] for x in models)


def next_settings(f: Fold) -> dict[str, Any] | None:
    """The ModelSettings a fallback from the current settings moves to, or None."""
    entries = chain(f)
    current = f.settings
    at = next((i for i, s in enumerate(entries) if s == current), None)
    if at is None:
        at = next((i for i, s in enumerate(entries) if _same_model(s, current)), -1)
    for s in entries[at + 1 :]:
        if s != current and _listed(f, s):
            return s
    return None


def revert_data(f: Fold) -> dict[str, Any] | None:
    """`settings_changed{revert}` data when a turn-scoped fallback is due to revert, else None."""
    if f.fallback_from is None or f.awaiting:
        return None
    if retry.policy(f)["fallback_scope"] != "turn":
        return None
    if f.turn_open and f.turns_completed <= f.fallback_turn:
        return None  # the turn that fell back is still running
    data: dict[str, Any] = {"reason": "revert", "settings": dict(f.fallback_from)}
    if f.fallback_event_id is not None:
        data["cause_event_id"] = f.fallback_event_id
    return data


def factories(f: Fold, extra: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """The model factories a user may switch the thread to: the pinned primary, the pinned
    fallback chain, then `extra` (the deployed agent's, for threads pinned before the chain)."""
    primary = epoch_settings({"data": f.started, "type": "thread_started"}) if f.started else None
    out = [primary] if primary else []
    return out + chain(f) + [dict(s) for s in extra]


def settings_for(
    f: Fold,
    model: Mapping[str, Any],
    *,
    model_params: Mapping[str, Any] | None = None,
    reasoning_carryover: str | None = None,
    extra: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any] | None:
    """ModelSettings for a user's switch to `model` (SettingsChange): adapter and params from
    the factory naming it, params overridden by the body's, carryover the body's or `keep`
    (the contract's default). None if no factory names the model."""
    want = {"model": dict(model)}
    factory = next((s for s in factories(f, extra) if _same_model(s, want)), None)
    if factory is None:
        return None
    return {
        "adapter": factory["adapter"],
        "model": {"name": model["name"], "provider": model["provider"]},
        "model_params": dict(model_params) if model_params is not None else factory["model_params"],
        "reasoning_carryover": reasoning_carryover or "keep",
    }
