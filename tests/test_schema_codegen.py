"""The generated validators (threads_aws/_validators.py, from threads_aws/schema_gen.py) are fresh
and accept exactly what fastjsonschema accepts for the same rewritten schemas.

Inputs: every line of the conformance logs, instances synthesised from each event type's schema
(so all 54 types are covered, not only those the cases record), and thousands of deterministic
mutants of both (dropped/extra keys, wrong types, out-of-range ints, bad uuids, enum/const swaps
that flip if/then conditionals, broken Part unions). fastjsonschema is a dev dependency only.
"""

from __future__ import annotations

import copy
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
from helpers import shared
from threads_aws.core import _validators as V
from threads_aws_dev import schema_gen

CASES = shared.CASES
SEED = 20240607
UUID = "0190a5b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b"
SAMPLES = {  # a valid string for each pattern the contract uses
    "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\\Z": UUID,
    "^[0-9a-f]{64}\\Z": "ab" * 32,
    "^[a-z][a-z0-9_]{0,63}\\Z": "read_file",
    "^[A-Za-z0-9_.-]{1,128}\\Z": "call_1",
    "^[a-z0-9.+-]+/[a-z0-9.+-]+\\Z": "text/plain",
    "^[a-z][a-z0-9_]{0,127}\\*?(\\(.+\\))?\\Z": "bash(ls *)",
    "^[A-Z]{3}\\Z": "USD",
    "^[0-9]+\\.[0-9]+\\.[0-9]+(-[0-9A-Za-z.-]+)?\\Z": "1.2.3-rc.1",
}
SCALARS = ["x", "", "X\n", 0, -1, 1, 7, 2**53 - 1, 2**53, True, False, None, 1.5, 5.0, [], {}, [1], {"a": 1}]


@pytest.fixture(scope="module")
def schemas() -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    return schema_gen.load()


@pytest.fixture(scope="module")
def reference(schemas: Any) -> dict[str, Any]:
    defs, roots, _ = schemas
    return {entry: fastjsonschema.compile({**root, "definitions": defs}) for entry, root in roots.items()}


def ours(entry: str) -> Any:
    return {"envelope": V.validate_envelope, "header": V.validate_header, "head": V.validate_head}.get(
        entry
    ) or V.EVENT_VALIDATORS[entry[3:]]


def verdicts(entry: str, value: Any, reference: dict[str, Any]) -> tuple[bool, bool]:
    try:
        reference[entry](copy.deepcopy(value))
        ref_ok = True
    except fastjsonschema.JsonSchemaValueException:
        ref_ok = False
    try:  # any exception but SchemaError fails the test
        ours(entry)(value)
        our_ok = True
    except V.SchemaError as exc:
        assert exc.message.startswith("data")
        our_ok = False
    return ref_ok, our_ok


# ------------------------------------------------------------------------ corpus
def conformance_lines() -> list[Any]:
    out = []
    for log in sorted(CASES.glob("*/log.jsonl")):
        for raw in log.read_bytes().split(b"\n"):
            if raw.strip():
                try:
                    out.append(json.loads(raw))
                except ValueError:
                    continue
    return out


class Synth:
    """Random instances of a schema, built from schema_gen's normalised nodes."""

    def __init__(self, defs: dict[str, Any], rng: random.Random) -> None:
        self.gen = schema_gen.Gen(defs)
        self.defs = defs
        self.rng = rng

    def resolved(self, subs: list[Any]) -> Any:
        """The node of `subs` with non-inlined $refs expanded and one branch of each oneOf/anyOf."""
        n = self.gen.node(subs)
        for _ in range(6):
            extra = [(self.defs[c], (c,)) for c in n.calls]
            extra += [self.rng.choice(alts) for alts in n.one_of + n.any_of if alts]
            n.calls, n.one_of, n.any_of = [], [], []
            if not extra:
                break
            m = self.gen.node(extra)
            n.consts += m.consts
            n.enums += m.enums
            n.patterns += m.patterns
            n.items += m.items
            n.required |= m.required
            for k, v in m.props.items():
                n.props.setdefault(k, []).extend(v)
            if m.types is not None:
                n.types = m.types if n.types is None else n.types & m.types
            for attr in ("min_items", "min_props", "min_len", "minimum"):
                if getattr(m, attr) is not None:
                    setattr(n, attr, max(getattr(m, attr), getattr(n, attr) or getattr(m, attr)))
            n.calls, n.one_of, n.any_of = m.calls, m.one_of, m.any_of
        return n

    def value(self, subs: list[Any], depth: int = 0) -> Any:
        n = self.resolved(subs)
        rng = self.rng
        if n.consts:
            return copy.deepcopy(n.consts[0])
        if n.enums:
            return rng.choice(n.enums[0])
        types = sorted(n.types) if n.types is not None else ["object" if n.has_object() else "string"]
        t = rng.choice(types)
        if t == "object" or n.has_object():
            out = {}
            keys = set(n.required) | {k for k in n.props if rng.random() < 0.6}
            if depth > 6:
                keys = set(n.required)
            for k in sorted(keys):
                out[k] = self.value(n.props[k], depth + 1) if k in n.props else "x"
            if n.min_props and not out and n.props:
                k = sorted(n.props)[0]
                out[k] = self.value(n.props[k], depth + 1)
            return out
        if t == "array":
            count = max(n.min_items or 0, rng.choice([0, 1, 2]) if depth < 6 else 0)
            return [self.value(n.items, depth + 1) if n.items else "x" for _ in range(count)]
        if t == "string":
            if n.patterns:
                return SAMPLES[n.patterns[0]]
            return rng.choice(["alpha", "b", "some text"])
        if t == "int":
            lo = n.minimum if n.minimum is not None else 0
            return int(lo) + rng.choice([0, 1, 3])
        if t == "frac":
            return 0.5
        if t == "boolean":
            return rng.choice([True, False])
        return None


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths(v, (*prefix, i))
    return out


def get(value: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        value = value[p]
    return value


def string_pool(defs: dict[str, Any]) -> list[str]:
    pool: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "const" and isinstance(v, str):
                    pool.add(v)
                elif k == "enum":
                    pool.update(x for x in v if isinstance(x, str))
                else:
                    walk(v)
        elif isinstance(node, list):
            for x in node:
                walk(x)

    walk(defs)
    return sorted(pool)


def mutate(value: Any, rng: random.Random, pool: list[str]) -> Any:
    value = copy.deepcopy(value)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        ps = paths(value)
        path = rng.choice(ps)
        node = get(value, path)
        op = rng.random()
        if not path:
            if isinstance(node, dict) and node:
                if op < 0.5:
                    del node[rng.choice(sorted(node))]
                else:
                    node["zz_extra"] = 1
            continue
        parent, key = get(value, path[:-1]), path[-1]
        if op < 0.15 and isinstance(parent, dict):
            del parent[key]
        elif op < 0.25 and isinstance(node, dict):
            node[rng.choice(["zz_extra", "type", "text", "ref", "principal", "code"])] = rng.choice(
                ["x", 1, None, {"issuer": "i", "tenant": "t", "subject": "s"}]
            )
        elif op < 0.45:
            parent[key] = rng.choice(pool)
        elif op < 0.55 and isinstance(node, str):
            parent[key] = rng.choice([node.upper(), node + "\n", node[:-1], node + "Z", ""])
        elif op < 0.6 and isinstance(node, list):
            parent[key] = node + node[:1] if node else []
        elif op < 0.65 and isinstance(node, int) and not isinstance(node, bool):
            parent[key] = rng.choice([str(node), node + 0.5, float(node), -node - 1])
        else:
            parent[key] = copy.deepcopy(rng.choice(SCALARS))
    return value


def targeted(bases: dict[str, list[Any]]) -> list[tuple[str, Any]]:
    """The if/then conditionals and Part unions, each broken and kept valid."""
    out: list[tuple[str, Any]] = []

    def variants(type_: str, *edits: Any) -> None:
        for base in bases.get(type_, [])[:5]:
            for edit in edits:
                ev = copy.deepcopy(base)
                edit(ev)
                out.append(("ev_" + type_, ev))

    no_principal = {"kind": "user"}
    principal = {"issuer": "api", "subject": "alice", "tenant": "acme"}
    user = {"kind": "user", "principal": principal}
    variants(
        "turn_completed",
        lambda e: e["data"].update(code="content_unsupported", reason="end_turn"),
        lambda e: e["data"].update(code="content_unsupported", reason="error"),
        lambda e: e["data"].update(code="bogus", reason="error"),
    )
    variants(
        "budget_exceeded",
        lambda e: (e["data"].update(scope="ancestor"), e["data"].pop("owner_thread_id", None)),
        lambda e: e["data"].update(scope="ancestor", owner_thread_id=SAMPLES[next(iter(SAMPLES))]),
        lambda e: e["data"].update(scope="run", owner_thread_id=SAMPLES[next(iter(SAMPLES))]),
    )
    variants(
        "tool_result",
        lambda e: (e["data"].update(origin="answered"), e.update(actor=dict(no_principal))),
        lambda e: (e["data"].update(origin="answered"), e.update(actor=dict(user))),
        lambda e: (e["data"].update(origin="executed"), e.update(actor={"kind": "tool"})),
    )
    variants(
        "settings_changed",
        lambda e: (e["data"].update(reason="user"), e.update(actor=dict(no_principal))),
        lambda e: (e["data"].update(reason="user"), e.update(actor=dict(user))),
        lambda e: (e["data"].update(reason="user"), e.update(actor={**user, "kind": "recovery"})),
        lambda e: (e["data"].update(reason="fallback"), e.update(actor=dict(user))),
        lambda e: (e["data"].update(reason="fallback"), e.update(actor={"kind": "host"})),
    )
    part_types = [
        "text",
        "tool_use",
        "reasoning",
        "hosted_tool",
        "citation",
        "image_ref",
        "audio_ref",
        "document_ref",
        "video",
        1,
        None,
    ]

    def set_part_type(t: Any) -> Any:
        def f(e: dict[str, Any]) -> None:
            for part in e["data"].get("content", []):
                if isinstance(part, dict):
                    part["type"] = t

        return f

    for type_ in ("model_response", "tool_result", "user_input", "steer", "tool_result_late"):
        variants(
            type_,
            *(set_part_type(t) for t in part_types),
            lambda e: e["data"].update(content=[{"type": "text", "text": "a"}, "text"]),
            lambda e: e["data"].update(content=[]),
        )
    variants(
        "context_edited",
        lambda e: e["data"].update(reason="provider"),
        lambda e: e["data"].update(edits=[{"call_id": "c", "action": "redact"}]),
        lambda e: e["data"].update(edits=[{"call_id": "c", "action": "clear", "part": 1}]),
        lambda e: e["data"].update(
            edits=[{"call_id": "c", "action": "redact", "part": 0, "spans": [{"start": 0, "end": 2}]}]
        ),
    )
    variants(
        "effect_resolved",
        *(
            lambda e, o=o, b=b: e["data"].update(outcome=o, by=b)
            for o in ("confirmed_success", "safe_to_retry", "not_sent", "interrupted", "assume_done")
            for b in ("provider_dedup", "reconcile", "adapter", "sandbox_terminated", "human")
        ),
    )
    variants(
        "handoff",
        lambda e: (e["data"].update(forwarded="none"), e["data"].pop("forwarded_ref", None)),
        lambda e: e["data"].update(forwarded="summary"),
    )
    return out


@pytest.fixture(scope="module")
def corpus(schemas: Any, reference: dict[str, Any]) -> dict[str, Any]:
    defs, roots, types = schemas
    rng = random.Random(SEED)
    conf = conformance_lines()
    synth = Synth(defs, rng)
    synthesised: list[tuple[str, Any]] = []
    for entry in sorted(roots):
        for _ in range(40):
            synthesised.append((entry, synth.value([(roots[entry], ())])))
    bases: dict[str, list[Any]] = {}
    for value in conf:
        if isinstance(value, dict) and "format" not in value and value.get("type") in V.EVENT_VALIDATORS:
            bases.setdefault(value["type"], []).append(value)
    for entry, value in synthesised:
        if entry.startswith("ev_") and verdicts(entry, value, reference)[0]:
            bases.setdefault(entry[3:], []).append(value)
    return {"conf": conf, "synth": synthesised, "bases": bases, "pool": string_pool(defs), "types": types}


def entries_for(value: Any) -> list[str]:
    if isinstance(value, dict) and "format" in value:
        return ["header", "head"]
    out = ["envelope"]
    if isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"] in V.EVENT_VALIDATORS:
        out.append("ev_" + value["type"])
    return out


# ------------------------------------------------------------------------ tests
def test_validators_module_is_fresh() -> None:
    assert schema_gen.generate() == schema_gen.OUT.read_text()


def test_runtime_does_not_import_fastjsonschema() -> None:
    src = schema_gen.OUT.read_text()
    assert "fastjsonschema" not in src
    import threads_aws.core.schema as schema_mod

    assert "fastjsonschema" not in Path(schema_mod.__file__).read_text()


def test_every_type_has_a_valid_base(corpus: dict[str, Any]) -> None:
    missing = sorted(set(corpus["types"]) - set(corpus["bases"]))
    assert not missing, missing


@shared.needs
def test_agrees_on_conformance_lines(corpus: dict[str, Any], reference: dict[str, Any]) -> None:
    counts: Counter[str] = Counter()
    for value in corpus["conf"]:
        for entry in entries_for(value):
            ref_ok, our_ok = verdicts(entry, value, reference)
            assert ref_ok == our_ok, (entry, value)
            counts[f"{entry.split('_')[0]}:{'accept' if ref_ok else 'reject'}"] += 1
    print("conformance", dict(counts))
    assert counts["ev:accept"] > 250


def test_agrees_on_synthesised_instances(corpus: dict[str, Any], reference: dict[str, Any]) -> None:
    counts: Counter[bool] = Counter()
    for entry, value in corpus["synth"]:
        ref_ok, our_ok = verdicts(entry, value, reference)
        assert ref_ok == our_ok, (entry, value)
        counts[ref_ok] += 1
    print("synthesised: accept", counts[True], "reject", counts[False])
    assert counts[True] > 500


def test_agrees_on_every_event_validator_cross_type(corpus: dict[str, Any], reference: Any) -> None:
    """Each base event against every event type's validator (type/data mismatches)."""
    n = 0
    for _, values in sorted(corpus["bases"].items()):
        for value in values[:2]:
            for other in sorted(corpus["types"]):
                ref_ok, our_ok = verdicts("ev_" + other, value, reference)
                assert ref_ok == our_ok, (other, value)
                n += 1
    assert n > 54 * 54


def test_agrees_on_mutants(corpus: dict[str, Any], reference: dict[str, Any]) -> None:
    rng = random.Random(SEED + 1)
    seeds = [v for v in corpus["conf"]] + [v for _, v in corpus["synth"]]
    seeds += [v for vs in corpus["bases"].values() for v in vs]
    counts: Counter[str] = Counter()
    for i in range(12000):
        value = mutate(seeds[i % len(seeds)], rng, corpus["pool"])
        for entry in entries_for(value):
            ref_ok, our_ok = verdicts(entry, value, reference)
            assert ref_ok == our_ok, (entry, value)
            counts["accept" if ref_ok else "reject"] += 1
    print("mutants", dict(counts))
    assert counts["reject"] > 5000 and counts["accept"] > 1000


def test_agrees_on_targeted_conditionals(corpus: dict[str, Any], reference: dict[str, Any]) -> None:
    counts: Counter[str] = Counter()
    for entry, value in targeted(corpus["bases"]):
        ref_ok, our_ok = verdicts(entry, value, reference)
        assert ref_ok == our_ok, (entry, value)
        counts[f"{entry}:{'accept' if ref_ok else 'reject'}"] += 1
    print("targeted", dict(sorted(counts.items())))
    for t in ("turn_completed", "budget_exceeded", "tool_result", "settings_changed", "model_response"):
        assert counts[f"ev_{t}:reject"] > 0, t
        assert counts[f"ev_{t}:accept"] > 0, t


@shared.needs
def test_error_names_the_path() -> None:
    ev = {"type": "tool_call", "data": {}}
    with pytest.raises(V.SchemaError) as info:
        V.validate_envelope({**ev, "seq": 1})
    assert info.value.message.startswith("data must contain")
    base = next(v for v in conformance_lines() if isinstance(v, dict) and v.get("type") == "model_response")
    bad = copy.deepcopy(base)
    bad["data"]["usage"]["input_tokens"] = -1
    with pytest.raises(V.SchemaError) as info:
        V.EVENT_VALIDATORS["model_response"](bad)
    assert info.value.message.startswith("data.data.usage.input_tokens ")
