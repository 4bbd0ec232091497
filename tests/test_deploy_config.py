"""What CloudFormation demands of a deploy, checked on template.yaml and samconfig.toml: a named
IAM resource (a RoleName, ManagedPolicyName, ...) is refused unless the deploy grants
CAPABILITY_NAMED_IAM (CAPABILITY_IAM covers only IAM resources with generated names)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from threads_aws_dev.local.infra import load_template

REPO = Path(__file__).resolve().parents[1]
NAME_PROPERTY = {
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::IAM::User": "UserName",
    "AWS::IAM::Group": "GroupName",
    "AWS::IAM::InstanceProfile": "InstanceProfileName",
}


def _capabilities() -> set[str]:
    doc = tomllib.loads((REPO / "samconfig.toml").read_text())
    caps = doc["default"]["deploy"]["parameters"]["capabilities"]
    return set(caps.split() if isinstance(caps, str) else caps)


def test_named_iam_resources_imply_capability_named_iam():
    resources = load_template(REPO / "template.yaml")["Resources"]
    named = [
        lid
        for lid, res in resources.items()
        if NAME_PROPERTY.get(res.get("Type", "")) in (res.get("Properties") or {})
    ]
    caps = _capabilities()
    assert "CAPABILITY_IAM" in caps  # the functions' generated roles
    if named:
        assert "CAPABILITY_NAMED_IAM" in caps, named
