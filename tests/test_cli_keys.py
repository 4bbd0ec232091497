"""`threads-aws keys create|revoke` as README's Deploy section runs it: the table from a stack's
outputs (`--stack`), the region from --region / boto3's config / samconfig.toml, and a one-line
error (never `internal error: NoRegionError`) when neither region nor table is known."""

from __future__ import annotations

import json

import pytest
from threads_aws.host.keys import ApiKeys
from threads_aws.store.api_keys import ApiKeyRows
from threads_aws_dev.cli import main

STACK_TEMPLATE = {
    "Resources": {"Q": {"Type": "AWS::SQS::Queue"}},
    "Outputs": {"StateTableName": {"Value": "{table}"}},
}


@pytest.fixture
def no_region(monkeypatch, tmp_path):
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "STATE_TABLE"):
        monkeypatch.delenv(var, raising=False)
    config = tmp_path / "aws-config"
    config.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.chdir(tmp_path)  # no samconfig.toml here


def _stack(aws) -> tuple[str, str]:
    """(stack name, table): the stack named after the fixture's prefix, since a moto mock left
    running by other code keeps state across tests (conftest's `aws`), and CreateStack refuses a
    name that exists."""
    name = f"{aws.prefix}-stack"
    table = aws.resources.physical["StateTable"]
    body = json.dumps(STACK_TEMPLATE).replace("{table}", table)
    aws.session.client("cloudformation").create_stack(StackName=name, TemplateBody=body)
    return name, table


def _token(out: str) -> str:
    return out.splitlines()[0]


def test_create_reads_the_table_from_the_stack_outputs(aws, capsys, monkeypatch):
    monkeypatch.delenv("STATE_TABLE", raising=False)
    stack, table = _stack(aws)
    assert main(["keys", "create", "--tenant", "acme", "--subject", "alice", "--stack", stack]) == 0
    token = _token(capsys.readouterr().out)
    keys = ApiKeys(ApiKeyRows(aws.ddb, table))
    assert keys.lookup(token).subject == "alice"
    assert main(["keys", "revoke", token, "--stack", stack]) == 0
    assert keys.lookup(token) is None


def test_without_a_region_the_error_says_how_to_give_one(no_region, capsys):
    assert main(["keys", "create", "--tenant", "acme", "--subject", "alice", "--stack", "s"]) != 0
    err = capsys.readouterr().err
    assert "no AWS region" in err and "--region" in err
    assert "internal error" not in err and "Traceback" not in err


def test_region_from_samconfig_when_boto3_has_none(no_region, aws, capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    stack, table = _stack(aws)
    (tmp_path / "samconfig.toml").write_text(
        f'version = 0.1\n[default.deploy.parameters]\nstack_name = "{stack}"\nregion = "us-east-1"\n'
    )
    assert main(["keys", "create", "--tenant", "acme", "--subject", "bob", "--stack", stack]) == 0
    assert ApiKeys(ApiKeyRows(aws.ddb, table)).lookup(_token(capsys.readouterr().out)).subject == "bob"


def test_missing_stack_or_output_or_table_is_one_line(aws, capsys, monkeypatch):
    monkeypatch.delenv("STATE_TABLE", raising=False)
    args = ["keys", "create", "--tenant", "a", "--subject", "b"]
    assert main([*args, "--stack", "nope", "--region", "us-east-1"]) != 0
    err = capsys.readouterr().err
    assert "stack nope in us-east-1" in err and "internal error" not in err
    assert main(args) != 0
    assert "--stack STACK_NAME" in capsys.readouterr().err
    assert main([*args, "--table", "no-such-table"]) != 0
    err = capsys.readouterr().err
    assert "keys create:" in err and "internal error" not in err
