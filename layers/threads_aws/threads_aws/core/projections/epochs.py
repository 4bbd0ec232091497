"""Settings epochs (semantics §4 "Retries, fallback, settings") and the ``model`` projection.

An epoch starts at ``thread_started`` and at each ``settings_changed``; the pinned
``thread_started.policy`` lasts the whole chain. `SettingsEpoch` follows them in chain order, so
a projection that prices or names a request (``cost``, ``model``) sees the epoch current at
that request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..fold import epoch_settings
from ._chain import Event, JsonObj, data_of


@dataclass(slots=True)
class SettingsEpoch:
    """The pinned policy and the settings epoch current at a point of the chain.

    Feed every event to :meth:`observe` in order; it returns True for ``thread_started`` and
    ``settings_changed`` (the events that start an epoch).
    """

    policy: Mapping[str, Any] | None = None
    model: Mapping[str, Any] | None = None
    model_params: Mapping[str, Any] = field(default_factory=dict)
    _models: dict[tuple[Any, Any], Mapping[str, Any]] = field(default_factory=dict)

    def observe(self, ev: Event) -> bool:
        t = ev.get("type")
        if t == "thread_started":
            d = data_of(ev)
            pol = d.get("policy")
            self.policy = pol if isinstance(pol, Mapping) else None
            self._models = {}
            if self.policy is not None:
                for m in self.policy.get("models") or ():
                    if isinstance(m, Mapping):
                        self._models.setdefault((m.get("provider"), m.get("name")), m)
            self._set(epoch_settings(ev) or {})
            return True
        if t == "settings_changed":
            s = epoch_settings(ev)
            if s is not None:
                self._set(s)
            return True
        return False

    def _set(self, s: Mapping[str, Any]) -> None:
        m = s.get("model")
        self.model = m if isinstance(m, Mapping) else None
        p = s.get("model_params")
        self.model_params = p if isinstance(p, Mapping) else {}

    def model_entry(self) -> Mapping[str, Any] | None:
        """The ``policy.models[]`` entry of the current epoch's model, if listed."""
        if self.model is None:
            return None
        return self._models.get((self.model.get("provider"), self.model.get("name")))


def settings_at(events: Iterable[Event]) -> SettingsEpoch:
    """The settings epoch after the given events."""
    st = SettingsEpoch()
    for ev in events:
        st.observe(ev)
    return st


def model(events: Iterable[Event]) -> JsonObj | None:
    """The ModelRef of the latest settings epoch; ``None`` before ``thread_started``."""
    m = settings_at(events).model
    return {"provider": m.get("provider"), "name": m.get("name")} if m is not None else None
