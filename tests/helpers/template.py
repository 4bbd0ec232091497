"""template.yaml as CloudFormation receives it: through the SAM translator (the transform
`sam deploy` runs), with any parameter values."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def translate(parameters: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The translated template's Resources (local CodeUri/ContentUri stand in as S3 URIs)."""
    translator = pytest.importorskip("samtranslator.translator.transform")
    from samtranslator.yaml_helper import yaml_parse

    text = re.sub(
        r"(CodeUri|ContentUri): \S+", r"\1: s3://bucket/key.zip", (REPO / "template.yaml").read_text()
    )

    class Policies:
        def load(self) -> dict[str, str]:
            names = (
                "AWSLambdaBasicExecutionRole",
                "AWSXrayWriteOnlyAccess",
                "AWSLambdaSQSQueueExecutionRole",
            )
            return {n: f"arn:aws:iam::aws:policy/service-role/{n}" for n in names}

    old = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = old or "us-east-1"
    try:
        out = translator.transform(yaml_parse(text), dict(parameters or {}), Policies())
    finally:
        if old is None:
            os.environ.pop("AWS_DEFAULT_REGION", None)
    return dict(out["Resources"])


def of_type(res: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in res.items() if v["Type"] == kind}
