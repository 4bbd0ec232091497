"""The security scan of template.yaml: checkov over the template as written (SAM resources) and as
CloudFormation receives it (through the SAM translator: the roles, the API stage, the permissions
SAM generates), every finding answered by an exception in .ci/checkov-skips.yaml with its reason.

Exit status 1 on a finding no exception answers, or an exception that answers nothing (a fixed
finding takes its exception along). checkov pins many packages, so it lives in a venv of its own
(CHECKOV_VENV, default ~/.cache/threads-aws/checkov-VERSION), created on first use:

    .venv/bin/python .ci/scan_template.py
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
CHECKOV = "3.3.30"
SKIPS = REPO / ".ci" / "checkov-skips.yaml"


def checkov() -> Path:
    venv = Path(
        os.environ.get("CHECKOV_VENV") or Path.home() / ".cache" / "threads-aws" / f"checkov-{CHECKOV}"
    )
    exe = venv / "bin" / "checkov"
    if not exe.exists():
        print(f"== installing checkov {CHECKOV} into {venv}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [
                str(venv / "bin" / "pip"),
                "install",
                "--quiet",
                "--disable-pip-version-check",
                f"checkov=={CHECKOV}",
            ],
            check=True,
        )
    return exe


def translated() -> dict[str, Any]:
    """template.yaml through the SAM translator (what `sam deploy` sends): local CodeUri and
    ContentUri stand in as S3 URIs, the default parameter values apply."""
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    source = (REPO / "template.yaml").read_text()
    text = re.sub(r"(CodeUri|ContentUri): \S+", r"\1: s3://bucket/key.zip", source)

    class Policies:  # the managed policies SAM attaches by name (no IAM call)
        def load(self) -> dict[str, str]:
            names = (
                "AWSLambdaBasicExecutionRole",
                "AWSXrayWriteOnlyAccess",
                "AWSLambdaSQSQueueExecutionRole",
                "AWSLambdaVPCAccessExecutionRole",
            )
            return {n: f"arn:aws:iam::aws:policy/service-role/{n}" for n in names}

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    out: dict[str, Any] = transform(yaml_parse(text), {}, Policies())
    return out


def findings(files: dict[str, Path]) -> list[tuple[str, str, str, str]]:
    """(which, check id, resource logical id, check name) of every failed check."""
    out = subprocess.run(
        [
            str(checkov()),
            "--framework",
            "cloudformation",
            "--output",
            "json",
            "--quiet",
            "--compact",
            "--skip-download",
            *[a for p in files.values() for a in ("-f", str(p))],
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode not in (0, 1) or not out.stdout.strip():
        sys.exit(f"checkov failed ({out.returncode}):\n{out.stderr[-4000:]}")
    reports = json.loads(out.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    by_name = {p.name: name for name, p in files.items()}  # distinct file names
    got = []
    for report in reports:
        assert report["summary"]["parsing_errors"] == 0, report["summary"]
        for r in report["results"]["failed_checks"]:
            which = by_name[Path(r["file_path"]).name]
            got.append((which, r["check_id"], r["resource"].rsplit(".", 1)[-1], r["check_name"]))
    return sorted(set(got))


def load_skips() -> list[dict[str, Any]]:
    skips: list[dict[str, Any]] = yaml.safe_load(SKIPS.read_text())["skips"]
    for s in skips:
        assert set(s) == {"id", "resources", "reason"} and len(s["reason"].split()) >= 8, s
    return skips


def covers(patterns: list[str], resource: str) -> bool:
    """`resource` matches a pattern and no "!pattern" (an exclusion) of the list."""
    include = [p for p in patterns if not p.startswith("!")]
    exclude = [p[1:] for p in patterns if p.startswith("!")]
    return any(fnmatch.fnmatchcase(resource, p) for p in include) and not any(
        fnmatch.fnmatchcase(resource, p) for p in exclude
    )


def answer(found: list[tuple[str, str, str, str]], skips: list[dict[str, Any]]) -> int:
    used: set[int] = set()
    open_ = []
    for which, cid, res, name in found:
        hit = next(
            (i for i, s in enumerate(skips) if s["id"] == cid and covers(s["resources"], res)),
            None,
        )
        if hit is None:
            open_.append(f"  {cid} {res} ({which}): {name}")
        else:
            used.add(hit)
    print(
        f"checkov {CHECKOV}: {len(found)} findings, {len(found) - len(open_)} answered by "
        f"{len(used)} of {len(skips)} exceptions in {SKIPS.relative_to(REPO)}"
    )
    for s in skips:
        n = sum(1 for _, cid, res, _ in found if cid == s["id"] and covers(s["resources"], res))
        print(f"  {s['id']} x{n}: {' '.join(s['reason'].split())[:100]}...")
    stale = [f"  {s['id']} {s['resources']}" for i, s in enumerate(skips) if i not in used]
    if open_:
        print("unanswered (fix it, or add an exception with its reason):", *open_, sep="\n")
    if stale:
        print("exceptions that answer nothing (remove them):", *stale, sep="\n")
    return 1 if open_ or stale else 0


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        cfn = Path(tmp) / "template.translated.json"
        cfn.write_text(json.dumps(translated(), indent=1))
        found = findings({"template.yaml": REPO / "template.yaml", "translated": cfn})
    return answer(found, load_skips())


if __name__ == "__main__":
    sys.exit(main())
