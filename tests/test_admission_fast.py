"""The fast admission leaf (`canonical.admit_fast`) the importer runs once per line: it returns a
value only for bytes that are JCS, and never for a line holding a float (orjson writes some
floats unlike JCS), whatever orjson's float spelling."""

from __future__ import annotations

import json
import random
import struct
from typing import Any

import orjson
import pytest
import rfc8785
from threads_aws.core.canonical import NotCanonical, admit, admit_fast

CHARS = 'ab"\\:,[.e+-0123é€\U0001f600 '


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 3 or r < 0.35:
        return rng.choice(
            [
                lambda: "".join(rng.choice(CHARS) for _ in range(rng.randint(0, 8))),
                lambda: rng.randint(-(2**53) + 1, 2**53 - 1),
                lambda: rng.choice([0.5, 1000.0, 1e16, 1e21, 1e-6, 1e-7, 123.456, -2.0, 5e-324]),
                lambda: rng.choice([True, False, None]),
            ]
        )()
    if r < 0.7:
        return {
            "".join(rng.choice("abc:,.") for _ in range(rng.randint(0, 3))): _random_value(rng, depth + 1)
            for _ in range(rng.randint(0, 4))
        }
    return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def _has_float(v: Any) -> bool:
    if isinstance(v, float):
        return True
    if isinstance(v, dict):
        return any(_has_float(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_float(x) for x in v)
    return False


def test_fast_value_only_for_jcs_bytes_without_floats() -> None:
    rng = random.Random(20260101)
    fast = 0
    for _ in range(4000):
        v = {"v": _random_value(rng)}
        for raw in (rfc8785.dumps(v), orjson.dumps(v, option=orjson.OPT_SORT_KEYS)):
            got = admit_fast(raw)
            if got is None:
                continue
            fast += 1
            assert raw == rfc8785.dumps(got) and got == json.loads(raw)
            assert not _has_float(got)
    assert fast > 1000  # the fast path is taken, not only refused


@pytest.mark.parametrize("seed", range(3))
def test_every_orjson_float_spelling_leaves_the_fast_path(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(20000):
        r = rng.random()
        if r < 0.5:
            f = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        elif r < 0.8:
            f = float(rng.randint(-(10**6), 10**6)) * 10.0 ** rng.randint(-30, 30)
        else:
            f = float(rng.choice([1, 2, 5, 9])) * 10.0 ** rng.randint(-320, 300)
        if f != f or f in (float("inf"), float("-inf")):
            continue
        token = orjson.dumps(f)
        for raw in (b'{"a":' + token + b"}", b'{"a":[' + token + b"]}", b'{"a":[1,' + token + b"]}"):
            assert admit_fast(raw) is None, raw
            # the exact path decides: JCS bytes are admitted, others refused
            if rfc8785.dumps(json.loads(raw)) == raw:
                assert admit(raw) == json.loads(raw)
            else:
                with pytest.raises(NotCanonical):
                    admit(raw)


def test_float_lookalikes_inside_strings_stay_fast() -> None:
    for raw in [
        b'{"a":"0190a5b2-7c3e-7e4f"}',
        b'{"a":"x,5e-7"}',
        b'{"a":"[1e+21"}',
        b'{"a":"python 3.11"}',
    ]:
        assert admit_fast(raw) == json.loads(raw)


def test_an_event_line_over_a_mib_refuses_the_import_at_its_position() -> None:
    # admit_fast declines it; the exact path must refuse it (it once admitted it).
    from threads_aws.core.errors import LogError
    from threads_aws.core.importer import import_log
    from threads_aws.core.lines import header_line

    header = header_line("0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b", "0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5c", 1)
    big = b'{"a":"' + b"x" * (1 << 20) + b'"}'
    assert admit_fast(big) is None
    with pytest.raises(LogError) as info:
        import_log(header + b"\n" + big + b"\n")
    assert (info.value.code, info.value.seq) == ("invalid_line", 1)
    assert "1 MiB" in str(info.value)
