"""The generated line validators prove an envelope's id and hash fields valid with one regex
over their values joined by newlines (schema_gen `emit_batch`). Values that smuggle a newline
(the joiner) must still be refused, by the field's own check and message."""

from __future__ import annotations

import copy
import itertools

import pytest
from threads_aws.core import _validators as V

U1 = "0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"
U2 = "0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5c"
H = "ab" * 32
EVENT = {
    "actor": {"kind": "host"},
    "branch_id": U1,
    "critical": True,
    "data": {"reason": "end_turn"},
    "epoch": 1,
    "event_id": U2,
    "prev_hash": H,
    "seq": 3,
    "thread_id": U1,
    "time": 5,
    "type": "turn_completed",
    "type_version": 1,
}
FIELDS = ("branch_id", "event_id", "prev_hash", "thread_id")


def test_the_envelope_is_batched() -> None:
    assert "_RB1" in V.__dict__
    V.EVENT_VALIDATORS["turn_completed"](copy.deepcopy(EVENT))
    V.validate_envelope(copy.deepcopy(EVENT))


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize(
    "bad",
    [
        f"{U1}\n{U2}",  # two valid pieces where one is expected
        f"{U1}\n",
        f"\n{U1}",
        f"{U1}\n{H}\n{U1}",
        f"{H}\n{U1}",
        "",
        U1.upper(),
    ],
)
def test_joined_values_with_newlines_are_refused_by_their_own_check(field: str, bad: str) -> None:
    ev = copy.deepcopy(EVENT)
    ev[field] = bad
    for validate in (V.validate_envelope, V.EVENT_VALIDATORS["turn_completed"]):
        with pytest.raises(V.SchemaError) as exc:
            validate(ev)
        assert exc.value.path == "." + field and "must match pattern" in exc.value.rule


def test_the_first_bad_field_in_key_order_is_named() -> None:
    for a, b in itertools.combinations(FIELDS, 2):
        ev = copy.deepcopy(EVENT)
        ev[a] = ev[b] = "x"
        with pytest.raises(V.SchemaError) as exc:
            V.validate_envelope(ev)
        assert exc.value.path == "." + a


def test_a_non_string_is_named_as_before() -> None:
    ev = copy.deepcopy(EVENT)
    ev["prev_hash"] = 7
    with pytest.raises(V.SchemaError) as exc:
        V.validate_envelope(ev)
    assert (exc.value.path, exc.value.rule) == (".prev_hash", "must be string")
