# ruff: noqa: E501  (benchmark report lines)
"""Benchmark: compiled JSON-Schema validators (ours) vs generated pydantic v2 models.

Issue: "measure pydantic v2 models vs a compiled JSON-Schema validator for the 53 data shapes
and keep the faster one". Both sides validate the same event dicts:

(a) compiled-jsonschema: the per-type validators schema_gen compiles into core/_validators.py,
    dispatched as `Importer.feed` does (the type's validator, or the envelope for an unknown
    (type, type_version));
(b) pydantic: `TypeAdapter(Model_for_type).validate_python(event, strict=True)`, one adapter
    per event type, picked by `event["type"]` (the same dispatch (a) does).

The pydantic models are generated on every run into a temporary folder (nothing generated is
tracked) by datamodel-code-generator, a benchmark-only tool (`pip install -e '.[bench]'`; it
brings black and isort, so it is in no other extra). Without it the pydantic side is skipped
with a message and only (a) is measured. The generator input is derived here: one JSON Schema
document from schemas/openapi.json `events_*` (+ the extra
`answer_rejected` in schemas/events-extra.schema.json): one flat object schema per event type =
Envelope properties with `type`/`type_version`/`critical`/`data` taken from that type (the
same meaning as schema_gen's `allOf[Envelope, ev_T]`), `additionalProperties: false` kept so the
generator emits `extra="forbid"`, JsonValue accepting anything (as schema_gen does), and runs
`datamodel-codegen` on it. Keywords the generator cannot express are counted and printed.

Corpus: the 10,000 events of benchmarks/log_verify.py's generator plus every event line of
/work/shared/conformance/cases/*/log.jsonl that passes our validator. Also ~20 mutated invalid
events, to compare what each side rejects.

The last line printed is `faster: compiled-jsonschema|pydantic (<x>x)`.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SCHEMAS = ROOT / "schemas"
MODELS_MODULE = "_pydantic_models"  # written into a temporary folder by `regenerate`
CASES = Path("/work/shared/conformance/cases")
PREFIX = "#/components/schemas/"
ENVELOPE_OWN = ("type", "type_version", "critical", "data")
UNEXPRESSED = ("if", "then", "else", "not")  # dropped by datamodel-codegen for pydantic models


# ------------------------------------------------------------------------ schema derivation
def _refs(node: Any) -> Any:
    if isinstance(node, list):
        return [_refs(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _refs(v) for k, v in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith(PREFIX):
        out["$ref"] = "#/$defs/" + ref[len(PREFIX) :]
    return out


def _class_name(type_name: str) -> str:
    return "Ev" + "".join(p.capitalize() for p in type_name.split("_"))


def derive_schema() -> tuple[dict[str, Any], dict[str, str]]:
    """JSON Schema doc for datamodel-codegen; and event type -> class name."""
    openapi = json.loads((SCHEMAS / "openapi.json").read_text())
    comps = {k: v for k, v in openapi["components"]["schemas"].items() if k.startswith("events_")}
    extra = json.loads((SCHEMAS / "events-extra.schema.json").read_text())["definitions"]
    defs = {k: _refs(v) for k, v in comps.items()}
    defs["events_JsonValue"] = {"description": "Any JSON value (as in schema_gen)."}
    env = defs["events_Envelope"]
    per_type: dict[str, dict[str, Any]] = {}
    for alt in comps["events_Event"]["allOf"][1]["oneOf"]:
        name = alt["$ref"][len(PREFIX) :]
        per_type[comps[name]["properties"]["type"]["const"]] = defs[name]
    for schema in extra.values():
        s = _refs(schema)
        s = json.loads(json.dumps(s).replace('"#/components/schemas/', '"#/$defs/'))
        per_type[s["properties"]["type"]["const"]] = s
    classes: dict[str, str] = {}
    for type_name, s in per_type.items():
        props = {k: v for k, v in env["properties"].items() if k not in ENVELOPE_OWN}
        props.update({k: s["properties"][k] for k in ENVELOPE_OWN})
        flat: dict[str, Any] = {
            "type": "object",
            "additionalProperties": False,
            "required": list(env["required"]),
            "properties": props,
        }
        for kw in ("if", "then", "else", "not", "allOf"):  # top-level conditionals, kept verbatim
            if kw in s:
                flat[kw] = s[kw]
        cls = _class_name(type_name)
        flat["title"] = cls
        defs[cls] = flat
        classes[type_name] = cls
    doc = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "EventsForPydantic",
        "description": "Derived from schemas/openapi.json events_* by benchmarks/validation_compare.py",
        "oneOf": [{"$ref": f"#/$defs/{c}"} for c in classes.values()],
        "$defs": defs,
    }
    return doc, classes


def unexpressed_keywords(doc: dict[str, Any]) -> Counter[str]:
    """Count schema keywords pydantic models from datamodel-codegen do not enforce."""
    found: Counter[str] = Counter()

    def walk(node: Any, in_props: bool = False) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if in_props:
                    walk(v)
                    continue
                if k in UNEXPRESSED:
                    found[k] += 1
                walk(v, k in ("properties", "$defs"))
        elif isinstance(node, list):
            for x in node:
                walk(x)

    walk({k: v for k, v in doc["$defs"].items() if not k.startswith("Ev")})
    return found


def generator_available() -> bool:
    return importlib.util.find_spec("datamodel_code_generator") is not None


def regenerate(target: Path) -> Path:
    """Write `<target>/_pydantic_models.py` (the pydantic models and EVENT_MODELS); returns it."""
    doc, classes = derive_schema()
    models = target / f"{MODELS_MODULE}.py"
    src = target / "events.schema.json"
    src.write_text(json.dumps(doc, indent=1))
    cmd = [
        sys.executable,
        "-m",
        "datamodel_code_generator",
        "--input",
        str(src),
        "--input-file-type",
        "jsonschema",
        "--output",
        str(models),
        "--output-model-type",
        "pydantic_v2.BaseModel",
        "--target-python-version",
        "3.11",
        "--use-annotated",
        "--field-constraints",
        "--enum-field-as-literal",
        "all",
        "--use-standard-collections",
        "--use-union-operator",
        "--collapse-root-models",
        "--use-title-as-name",
        "--disable-timestamp",
    ]
    subprocess.run(cmd, check=True)
    table = "".join(f"    {t!r}: {c},\n" for t, c in classes.items())
    models.write_text(models.read_text() + "\n\nEVENT_MODELS = {\n" + table + "}\n")
    lines = models.read_text().count("\n")
    print(f"generated {len(classes)} pydantic event models ({lines:,} lines) into a temporary folder")
    return models


def ours_check(ev: dict[str, Any]) -> bool:
    """Schema check of one event as `Importer.feed` does it; True if its type is known. Raises
    SchemaError (or LogError for an unknown critical type)."""
    from threads_aws.core import _validators as V
    from threads_aws.core.errors import LogError

    t = ev.get("type")
    validator = V.EVENT_VALIDATORS.get(t) if isinstance(t, str) else None
    if ev.get("type_version") != 1:
        validator = None
    (validator or V.validate_envelope)(ev)
    if validator is None and ev["critical"]:
        raise LogError("unsupported_critical_event", ev["seq"], f"unknown critical type {t!r}")
    return validator is not None


# ------------------------------------------------------------------------ corpus
def corpus() -> tuple[list[dict[str, Any]], int, int]:
    sys.path.insert(0, str(HERE))
    import log_verify
    from threads_aws.core._validators import SchemaError
    from threads_aws.core.canonical import NotCanonical, admit
    from threads_aws.core.errors import LogError

    _, _, events = log_verify.generate()
    conf, skipped = [], 0
    for log in sorted(CASES.glob("*/log.jsonl")):
        for raw in log.read_bytes().split(b"\n"):
            if not raw:
                continue
            try:
                value = admit(raw)
            except NotCanonical:
                skipped += 1
                continue
            if "format" in value or "seq" not in value:
                continue  # header / head lines
            try:
                if ours_check(value):
                    conf.append(value)
                else:
                    skipped += 1  # unknown non-critical: not one of the shapes
            except (SchemaError, LogError):
                skipped += 1
    return events + conf, len(conf), skipped


def mutations(base: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """~20 invalid events, each one rule broken."""
    out: list[tuple[str, dict[str, Any]]] = []

    def mut(label: str, type_: str, fn: Any) -> None:
        ev = copy.deepcopy(base[type_])
        fn(ev)
        out.append((label, ev))

    def setp(path: str, value: Any) -> Any:
        def f(ev: dict[str, Any]) -> None:
            node = ev
            *head, last = path.split(".")
            for p in head:
                node = node[int(p)] if isinstance(node, list) else node[p]
            node[last] = value

        return f

    def delp(path: str) -> Any:
        def f(ev: dict[str, Any]) -> None:
            node = ev
            *head, last = path.split(".")
            for p in head:
                node = node[p]
            del node[last]

        return f

    mut("seq as string", "tool_call", setp("seq", "5"))
    mut("seq = 0 (minimum 1)", "tool_call", setp("seq", 0))
    mut("seq as float 5.0", "tool_call", setp("seq", 5.0))
    mut("epoch bool true", "tool_call", setp("epoch", True))
    mut("time > 2^53-1", "tool_call", setp("time", 2**53))
    mut("extra envelope key", "tool_call", setp("extra", 1))
    mut("extra data key", "tool_call", setp("data.extra", 1))
    mut("missing envelope prev_hash", "tool_call", delp("prev_hash"))
    mut("missing data.call_id", "tool_call", delp("data.call_id"))
    mut("call_id bad pattern", "tool_call", setp("data.call_id", "call 1!"))
    mut("event_id uppercase uuid", "tool_call", lambda ev: ev.update(event_id=ev["event_id"].upper()))
    mut("prev_hash 63 hex", "tool_call", lambda ev: ev.update(prev_hash=ev["prev_hash"][:63]))
    mut("prev_hash + trailing newline", "tool_call", lambda ev: ev.update(prev_hash=ev["prev_hash"] + "\n"))
    mut("critical flipped to false", "tool_call", setp("critical", False))
    mut("type_version 1 -> true", "tool_call", setp("type_version", True))
    mut("actor.kind not in enum", "tool_call", setp("actor.kind", "robot"))
    mut("data.input not an object", "tool_call", setp("data.input", [1]))
    mut("tool_result is_error string", "tool_result", setp("data.is_error", "false"))
    mut("tool_result origin not in enum", "tool_result", setp("data.origin", "guessed"))
    mut("usage.input_tokens negative", "model_response", setp("data.usage.input_tokens", -1))
    mut("model_response content part unknown type", "model_response", setp("data.content.0.type", "video"))
    mut(
        "turn_completed code without reason error (if/then)",
        "turn_completed",
        setp("data.code", "content_unsupported"),
    )
    mut(
        "type says tool_call, data of permission_decision",
        "tool_call",
        lambda ev: ev.update(data=copy.deepcopy(base["permission_decision"]["data"])),
    )
    return out


# ------------------------------------------------------------------------ timing
def best_of_interleaved(fns: list[Any], runs: int) -> list[float]:
    """Best time of each fn; runs are interleaved so machine noise hits all sides alike."""
    best = [float("inf")] * len(fns)
    for _ in range(runs):
        for i, fn in enumerate(fns):
            t0 = time.process_time()  # CPU time: less disturbed by other processes' load
            fn()
            best[i] = min(best[i], time.process_time() - t0)
    return best


def cold_import(stmt: str, cwd: Path = HERE) -> float:
    """Seconds to run `stmt` in a fresh interpreter (best of 3), run in `cwd`."""

    def run(code: str) -> float:
        prog = f"import time; t=time.perf_counter(); {code}; print(time.perf_counter()-t)"
        best = float("inf")
        for _ in range(3):
            env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            r = subprocess.run(
                [sys.executable, "-c", prog], capture_output=True, text=True, check=True, env=env, cwd=cwd
            )
            best = min(best, float(r.stdout.strip().splitlines()[-1]))
        return best

    return run(stmt)


def ours_reason(ev: dict[str, Any]) -> str | None:
    from threads_aws.core._validators import SchemaError
    from threads_aws.core.errors import LogError

    try:
        ours_check(ev)
        return None
    except SchemaError as exc:
        return exc.message
    except LogError as exc:
        return str(exc)


def pydantic_side(tmp: Path, events: list[dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    """Generate the models into `tmp`; (reason function, per-type validate_python)."""
    from pydantic import TypeAdapter, ValidationError

    regenerate(tmp)
    sys.path.insert(0, str(tmp))
    pm = importlib.import_module(MODELS_MODULE)
    adapters = {t: TypeAdapter(m) for t, m in pm.EVENT_MODELS.items()}

    def reason(ev: dict[str, Any]) -> str | None:
        ad = adapters.get(ev.get("type"))  # type: ignore[arg-type]
        if ad is None:
            return "unknown type"
        try:
            ad.validate_python(ev, strict=True)
            return None
        except ValidationError as exc:
            e = exc.errors()[0]
            return f"{'.'.join(map(str, e['loc']))}: {e['msg']}"

    return reason, {t: a.validate_python for t, a in adapters.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    from threads_aws.core import _validators as V

    events, n_conf, n_skipped = corpus()
    types = Counter(e["type"] for e in events)
    print(
        f"corpus: {len(events)} events ({len(events) - n_conf} generated + {n_conf} conformance;"
        f" {n_skipped} conformance lines skipped as invalid/unknown), {len(types)} distinct types"
    )
    base: dict[str, dict[str, Any]] = {}
    for ev in events:
        base.setdefault(ev["type"], ev)
    muts = mutations(base)
    validators = V.EVENT_VALIDATORS

    def run_compiled() -> None:
        for ev in events:
            validators[ev["type"]](ev)

    ours_rej = [(e["type"], r) for e in events if (r := ours_reason(e))]
    n = len(events)
    if not generator_available():
        (t_comp,) = best_of_interleaved([run_compiled], args.runs)
        print(f"valid corpus accepted: compiled-jsonschema {n - len(ours_rej)}/{n}")
        print(
            f"{'compiled-jsonschema (EVENT_VALIDATORS[type])':44s} {n / t_comp:12,.0f} events/s {t_comp / n * 1e6:9.2f} us/event"
        )
        print(
            "pydantic comparison skipped: datamodel-code-generator is not installed"
            " (pip install -e '.[bench]' to generate the models and compare)"
        )
        return
    with tempfile.TemporaryDirectory() as tmp:
        compare(Path(tmp), events, ours_rej, muts, run_compiled, args.runs)


def compare(
    tmp: Path,
    events: list[dict[str, Any]],
    ours_rej: list[tuple[str, str]],
    muts: list[tuple[str, dict[str, Any]]],
    run_compiled: Any,
    runs: int,
) -> None:
    from threads_aws.core import _validators as V

    pyd_ok, py_validate = pydantic_side(tmp, events)
    doc, classes = derive_schema()
    missing = sorted(set(V.EVENT_VALIDATORS) ^ set(classes))
    print(
        f"shapes: {len(V.EVENT_VALIDATORS)} compiled validators, {len(py_validate)} pydantic models"
        + (f", mismatch {missing}" if missing else "")
    )
    n = len(events)
    pyd_rej = [(e["type"], r) for e in events if (r := pyd_ok(e))]
    print(
        f"valid corpus accepted: compiled-jsonschema {n - len(ours_rej)}/{n}, pydantic {n - len(pyd_rej)}/{n}"
    )
    for t, r in pyd_rej[:5]:
        print(f"  pydantic rejects valid {t}: {r}")

    def run_pydantic() -> None:
        for ev in events:
            py_validate[ev["type"]](ev, strict=True)

    def run_pydantic_lax() -> None:
        for ev in events:
            py_validate[ev["type"]](ev)

    run_compiled(), run_pydantic()  # warm-up
    t_comp, t_pyd, t_lax = best_of_interleaved([run_compiled, run_pydantic, run_pydantic_lax], runs)

    # cold start (fresh interpreter, bytecode cache warm, as on a warm Lambda image)
    cold_comp = cold_import("import threads_aws.core._validators")
    cold_pyd_import = cold_import(f"import {MODELS_MODULE}", tmp)
    cold_pyd = cold_import(
        f"import {MODELS_MODULE} as m; from pydantic import TypeAdapter;"
        " a={t: TypeAdapter(c) for t, c in m.EVENT_MODELS.items()}",
        tmp,
    )
    cold_pydantic_only = cold_import("import pydantic")
    rows = [(label, ours_reason(ev) is not None, pyd_ok(ev) is not None) for label, ev in muts]

    print()
    print(f"{'approach':44s} {'events/s':>12s} {'us/event':>9s}")
    print(f"{'compiled-jsonschema (EVENT_VALIDATORS[type])':44s} {n / t_comp:12,.0f} {t_comp / n * 1e6:9.2f}")
    print(f"{'pydantic TypeAdapter.validate_python strict':44s} {n / t_pyd:12,.0f} {t_pyd / n * 1e6:9.2f}")
    print(f"{'pydantic TypeAdapter.validate_python lax':44s} {n / t_lax:12,.0f} {t_lax / n * 1e6:9.2f}")
    print()
    print(f"{'cold start (fresh interpreter, .pyc warm)':44s} {'ms':>12s}")
    print(f"{'import threads_aws.core._validators':44s} {cold_comp * 1000:12.1f}")
    print(f"{'import _pydantic_models (incl. pydantic)':44s} {cold_pyd_import * 1000:12.1f}")
    print(f"{'import _pydantic_models + 54 TypeAdapters':44s} {cold_pyd * 1000:12.1f}")
    print(f"{'  (import pydantic alone)':44s} {cold_pydantic_only * 1000:12.1f}")
    print()
    print(f"{'invalid mutant':58s} {'compiled':>9s} {'pydantic':>9s}")
    for label, o, p in rows:
        flag = "" if o == p else "   <- differ"
        print(f"{label:58s} {'reject' if o else 'ACCEPT':>9s} {'reject' if p else 'ACCEPT':>9s}{flag}")
    print(
        f"rejected: compiled {sum(o for _, o, _ in rows)}/{len(rows)}, pydantic {sum(p for _, _, p in rows)}/{len(rows)}"
    )
    print(
        "notes: 5.0 never reaches a validator (canonical admission refuses it: JCS writes 5);"
        " pydantic's Literal[1] matches True because True == 1 (strict mode too)"
    )
    print()
    print(
        "not expressible by datamodel-codegen -> pydantic (keyword occurrences dropped): "
        + ", ".join(f"{k} x{v}" for k, v in sorted(unexpressed_keywords(doc).items()))
    )
    if t_comp <= t_pyd:
        print(f"faster: compiled-jsonschema ({t_pyd / t_comp:.2f}x)")
    else:
        print(f"faster: pydantic ({t_comp / t_pyd:.2f}x)")


if __name__ == "__main__":
    main()
