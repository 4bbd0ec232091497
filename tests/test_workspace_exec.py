"""`exec`: the sandbox runner (materialise, run, capture changes, timeout kills the process
group) and the tool through the worker (the demo's `exec:` asks, then the files the command
wrote become the workspace, a snapshot follows). The sandbox runs as a local child process here
(SANDBOX_EXEC_LOCAL=1); deployed it is a function with no permissions and no network."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from helpers.engine import grant, make_ctx, new_thread, of_type, run, say, verify_export
from threads_aws.core.canonical import sha256_hex
from threads_aws.sandbox.exec_runner import run as run_sandbox


def f(path: str, data: bytes, mode: int = 0o644) -> dict[str, Any]:
    return {"data_b64": base64.b64encode(data).decode(), "mode": mode, "path": path}


def test_runner_reports_changed_new_and_deleted_files(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_TMP", str(tmp_path))
    files = [f("keep.txt", b"same"), f("edit.txt", b"old"), f("gone.txt", b"x"), f("d/x.sh", b"echo")]
    cmd = (
        "echo new > edit.txt && mkdir -p out && echo hi > out/new.txt && rm gone.txt"
        " && chmod 755 d/x.sh; echo done"
    )
    answer = run_sandbox({"command": cmd, "files": files, "timeout_ms": 10_000})
    assert answer["exit_code"] == 0 and answer["stdout"] == "done\n" and not answer["timed_out"]
    got = {c["path"]: (c["mode"], base64.b64decode(c["data_b64"])) for c in answer["changed"]}
    assert got == {"d/x.sh": (0o755, b"echo"), "edit.txt": (0o644, b"new\n"), "out/new.txt": (0o644, b"hi\n")}
    assert answer["deleted"] == ["gone.txt"]
    assert list(tmp_path.iterdir()) == []  # the tree is gone with the run


def test_runner_timeout_kills_the_process_group(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SANDBOX_TMP", str(tmp_path))
    started = time.monotonic()
    answer = run_sandbox({"command": "sleep 30 & sleep 30; echo never", "files": [], "timeout_ms": 500})
    assert answer["timed_out"] and answer["stdout"] == "" and time.monotonic() - started < 10


def test_exec_through_the_worker(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = make_ctx(aws)
    b = new_thread(ctx)
    say(ctx, b, "exec: echo hi")
    run(ctx, b)
    grant(ctx, b)
    run(ctx, b)
    r = of_type(ctx, b, "tool_result")[-1]["data"]
    assert r["is_error"] and r["preview"].startswith("exec_unavailable:")  # no sandbox configured

    monkeypatch.setenv("SANDBOX_EXEC_LOCAL", "1")
    say(ctx, b, "write in.txt: 3 4")
    run(ctx, b)
    say(ctx, b, "exec: cat in.txt | tr ' ' '\\n' > out.txt && rm in.txt && echo ok")
    run(ctx, b)
    grant(ctx, b)
    run(ctx, b)
    r = of_type(ctx, b, "tool_result")[-1]["data"]
    assert not r["is_error"], r["preview"]
    assert r["preview"] == "exit 0\n--- stdout\nok\n--- workspace: wrote out.txt, deleted in.txt"
    fold = ctx.writer.load(b).fold
    manifest = ctx.stores.artifacts.get(fold.workspace)
    assert sha256_hex(b"3\n4") in manifest.decode() and b"in.txt" not in manifest
    assert of_type(ctx, b, "snapshot")[-1]["data"]["manifest_hash"] == fold.workspace
    verify_export(ctx, b)


# ------------------------------------------------------------------ deployed shape (template.yaml)
REPO = Path(__file__).resolve().parents[1]
NETWORK_WAYS_OUT = {
    "AWS::EC2::InternetGateway",
    "AWS::EC2::EgressOnlyInternetGateway",
    "AWS::EC2::NatGateway",
    "AWS::EC2::VPCGatewayAttachment",
    "AWS::EC2::VPCEndpoint",
    "AWS::EC2::Route",
    "AWS::EC2::RouteTable",
    "AWS::EC2::SubnetRouteTableAssociation",
    "AWS::EC2::TransitGatewayAttachment",
    "AWS::EC2::VPCPeeringConnection",
    "AWS::EC2::VPNGatewayRoutePropagation",
}


def _template() -> dict[str, Any]:
    from threads_aws_dev.local.infra import load_template

    return load_template(REPO / "template.yaml")


def test_sandbox_function_has_no_aws_permissions_and_no_way_out() -> None:
    res = _template()["Resources"]
    fn = res["SandboxExecFunction"]["Properties"]
    assert fn["CodeUri"] == "functions/sandbox_exec/" and fn["Handler"] == "app.handler"
    assert (REPO / "functions" / "sandbox_exec" / "app.py").is_file()
    assert fn["Role"] == {"Fn::GetAtt": ["SandboxExecRole", "Arn"]}  # no SAM Policies: its own role
    assert "Policies" not in fn and fn["Tracing"] == "PassThrough"
    assert fn["VpcConfig"] == {
        "SubnetIds": [{"Ref": "SandboxSubnet"}],
        "SecurityGroupIds": [{"Ref": "SandboxSecurityGroup"}],
    }
    from threads_aws.engine.exec_tool import INVOKE_MARGIN_S
    from threads_aws.sandbox.exec_runner import MAX_TIMEOUT_MS

    assert fn["Timeout"] >= MAX_TIMEOUT_MS / 1000 + INVOKE_MARGIN_S

    role = res["SandboxExecRole"]["Properties"]
    assert set(role) == {"AssumeRolePolicyDocument", "Policies"}  # no managed policies, no boundary
    (policy,) = role["Policies"]
    logs, eni = policy["PolicyDocument"]["Statement"]
    assert logs == {
        "Effect": "Allow",
        "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
        "Resource": {"Fn::GetAtt": ["SandboxExecLogs", "Arn"]},
    }
    # What Lambda itself needs to attach the function to its subnet; the code can't use it:
    # nothing in the subnet routes anywhere (below).
    assert eni["Effect"] == "Allow" and set(eni["Action"]) == {
        "ec2:CreateNetworkInterface",
        "ec2:DescribeNetworkInterfaces",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
    }

    sg = res["SandboxSecurityGroup"]["Properties"]
    rules = [{k: v for k, v in r.items() if k != "Description"} for r in sg["SecurityGroupEgress"]]
    assert rules == [{"IpProtocol": "-1", "CidrIp": "127.0.0.1/32"}]
    assert "SecurityGroupIngress" not in sg
    vpc_refs = ({"Ref": "SandboxVpc"}, {"Ref": "SandboxSubnet"})
    for lid, r in res.items():
        props = json.dumps(r.get("Properties") or {})
        touches = any(json.dumps(ref) in props for ref in vpc_refs)
        assert not (touches and r["Type"] in NETWORK_WAYS_OUT), f"{lid} opens a way out of the sandbox"
    # Only the worker may invoke it.
    invokers = [
        lid
        for lid, r in res.items()
        if "SandboxExecFunction.Arn" in json.dumps(r) or '["SandboxExecFunction", "Arn"]' in json.dumps(r)
    ]
    assert invokers == ["RunStepFunction"]


# ------------------------------------------------------------------ the dev path: Lambda's Invoke API
@pytest.fixture
def local_lambda(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The template's functions behind `threads-aws dev`'s Lambda Invoke API (local.lambda_invoke),
    the worker's ordinary boto3 client pointed at it, SANDBOX_EXEC_FUNCTION as the template
    resolves it (`${AWS::StackName}-sandbox-exec`)."""
    from threads_aws_dev.local.lambda_invoke import LocalLambda
    from threads_aws_dev.local.runtime import Handlers
    from threads_aws_dev.local.sam import function_names, parse_template

    tpl = parse_template(REPO / "template.yaml")
    names = function_names(tpl, {}, "us-east-1", stack="wsx")
    assert names["wsx-sandbox-exec"] == "SandboxExecFunction"

    def start(timeout_s: int | None = None) -> Any:
        functions = dict(tpl.functions)
        if timeout_s is not None:  # a shorter function Timeout, to see Lambda's timeout answer
            functions["SandboxExecFunction"] = replace(functions["SandboxExecFunction"], timeout_s=timeout_s)
        api = LocalLambda(Handlers(functions), names=names).start()
        started.append(api)
        monkeypatch.setenv("AWS_ENDPOINT_URL_LAMBDA", api.url)
        return api

    started: list[Any] = []
    for var, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "SANDBOX_EXEC_FUNCTION": "wsx-sandbox-exec",
    }.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("SANDBOX_EXEC_LOCAL", raising=False)
    yield start
    for api in started:
        api.stop()


def test_dev_runs_exec_through_the_template_function(local_lambda: Any) -> None:
    from threads_aws.engine.exec_tool import invoke

    api = local_lambda()
    answer = invoke(
        {"command": "pwd; echo $HOME; ls; echo x > y.txt", "files": [f("a.txt", b"a")], "timeout_ms": 10_000}
    )
    assert api.invocations == 1  # through the Invoke API, not a child process of the worker
    out = answer["stdout"].splitlines()
    assert out[0].startswith("/tmp/ws-") and out[0].endswith("/workspace")  # Lambda's /tmp
    assert out[1] == out[0].removesuffix("/workspace") and out[2] == "a.txt"
    assert not Path(out[1]).exists()  # the tree is gone with the invocation
    assert [c["path"] for c in answer["changed"]] == ["y.txt"]
    timed = invoke({"command": "sleep 20", "files": [], "timeout_ms": 300})
    assert timed["timed_out"] is True  # the command's own limit, inside the function


def test_a_function_timeout_is_exec_failed(local_lambda: Any) -> None:
    from threads_aws.engine.exec_tool import invoke

    local_lambda(timeout_s=1)
    with pytest.raises(RuntimeError, match="Sandbox.Timedout"):
        invoke({"command": "sleep 3", "files": [], "timeout_ms": 5_000})


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")  # a killed orphan may linger as a zombie until reaped


def test_nothing_the_command_leaves_running_outlives_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A warm sandbox runs the next invocation (another branch's tree) in the same environment:
    a background process of this one must not survive into it."""
    monkeypatch.setenv("SANDBOX_TMP", str(tmp_path))
    answer = run_sandbox({"command": "sleep 30 >/dev/null 2>&1 & echo $!", "files": [], "timeout_ms": 10_000})
    assert answer["exit_code"] == 0 and not answer["timed_out"]
    pid = int(answer["stdout"])
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
