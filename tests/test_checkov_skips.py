"""The security scan's exceptions (.ci/checkov-skips.yaml) without checkov (CI runs the scan
itself: .ci/scan_template.py, in checkov's own venv): each names a check, the resources it
answers for (every literal name one of the template's, as written or as SAM expands it) and a
reason; the matcher honours exclusions."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import yaml
from helpers.template import translate

REPO = Path(__file__).resolve().parents[1]


def _scan() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scan_template", REPO / ".ci" / "scan_template.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_each_exception_names_real_resources_and_a_reason():
    skips = _scan().load_skips()  # asserts the shape and a reason of some words
    written = yaml.safe_load(
        re.sub(r"!\w+", "", (REPO / "template.yaml").read_text())  # tags dropped: names only
    )["Resources"]
    names = set(written) | set(translate())
    for s in skips:
        assert re.fullmatch(r"CKV2?_AWS_\d+", s["id"]), s
        for pat in s["resources"]:
            literal = pat.lstrip("!")
            if not any(c in literal for c in "*?["):
                assert literal in names, f"{s['id']}: no resource {literal}"
    assert len({s["id"] for s in skips}) == len(skips)  # one entry per check


def test_exclusions_win():
    covers = _scan().covers
    pats = ["*Function", "!ScheduleFireFunction"]
    assert covers(pats, "StartRunFunction") and not covers(pats, "ScheduleFireFunction")
    assert not covers(pats, "RunStepQueue")
