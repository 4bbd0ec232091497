"""README's Deploy section as written, so it cannot drift from what works:

- the build block, run verbatim by bash in a fresh copy of the repo (tracked and new files, no
  .venv, no build) with a fresh venv: the install, the python3.13 link in `.bin/` (never in the
  3.11 venv, which Python 3.13 would adopt), `sam build`;
- `sam deploy --guided` driven by pexpect with the README's table of prompts and answers, against
  a local moto server (AWS_ENDPOINT_URL): every prompt SAM asks is in the table and the table
  lists no prompt SAM doesn't ask, until SAM's first call that needs AWS itself (it creates its
  managed bucket stack, which moto's CloudFormation answers without the outputs SAM requires);
- the first-key block (URL from `sam list stack-outputs`, TOKEN from `threads-aws keys create
  --stack`) against a moto stack whose outputs name a moto state table.

The build takes minutes (a fresh venv's install, then the layer for cp313 aarch64: 7 to 13 min
on this busy 2-core machine), too long for every local run of the suite: it runs when
THREADS_README_BUILD=1, which `.ci/run` sets. Generous ceilings, no timing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
VENV_BIN = Path(sys.executable).parent


def deploy_section() -> str:
    text = README.read_text()
    start = text.index("\n## Deploy\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def blocks(section: str) -> list[str]:
    """The indented (4-space) code blocks, dedented."""
    out: list[list[str]] = []
    cur: list[str] | None = None
    prev_blank = True
    for line in section.splitlines():
        if line.startswith("    ") and (cur is not None or prev_blank):
            if cur is None:
                cur = []
                out.append(cur)
            cur.append(line[4:])
        elif not line.strip():
            if cur is not None:
                cur.append("")
        else:
            cur = None
        prev_blank = not line.strip()
    return ["\n".join(b).strip("\n") for b in out]


def block_with(last_line: str) -> str:
    found = [b for b in blocks(deploy_section()) if b.splitlines()[-1].strip() == last_line]
    assert len(found) == 1, f"README's Deploy has no single block ending {last_line!r}"
    return found[0]


def guided_table() -> dict[str, str]:
    """`prompt` -> the text to type ("" for Enter), from the table under **Deploy**."""
    rows: dict[str, str] = {}
    for line in deploy_section().splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|\s*([^|]*)\|", line)
        if not m:
            continue
        prompt, answer = m.group(1).strip(), m.group(2).strip()
        if answer.startswith("Enter"):
            rows[prompt] = ""
        else:
            typed = re.match(r"`([^`]*)`", answer)
            assert typed, f"README row {prompt!r}: answer {answer!r} is neither Enter nor `text`"
            rows[prompt] = typed.group(1)
    assert rows, "README's Deploy has no prompt table"
    return rows


def _aws_free_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VIRTUAL_ENV", "STATE_TABLE"))}
    env.update(SAM_CLI_TELEMETRY="0", TERM="dumb", **extra)
    return env


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    yield f"http://127.0.0.1:{port}"
    srv.stop()


def _moto_env(tmp: Path, moto_url: str) -> dict[str, str]:
    (tmp / "aws-config").write_text("")
    return _aws_free_env(
        AWS_ENDPOINT_URL=moto_url,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_CONFIG_FILE=str(tmp / "aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp / "aws-config"),
        PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
    )


# ------------------------------------------------------------------ the build


def _fresh_copy(dest: Path) -> None:
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for raw in files:
        if not raw:
            continue
        rel = raw.decode()
        src = REPO / rel
        if not src.is_file() or rel.startswith((".venv/", ".bin/", ".aws-sam/")):
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)


@pytest.mark.skipif(
    os.environ.get("THREADS_README_BUILD") != "1",
    reason="the README build from a fresh venv takes minutes: THREADS_README_BUILD=1 runs it (CI does)",
)
def test_the_build_block_builds_in_a_fresh_copy(tmp_path: Path) -> None:
    script = block_with("sam build")
    assert ".venv/bin/python3.13" not in script  # the 3.13 link never goes into the 3.11 venv
    clone = tmp_path / "clone"
    clone.mkdir()
    _fresh_copy(clone)
    # Nothing of this test's venv on PATH: the block must make its own.
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p) != VENV_BIN)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=clone,
        env=_aws_free_env(PATH=path),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    tail = (proc.stdout[-3000:], proc.stderr[-3000:])
    assert proc.returncode == 0, tail
    assert "Build Succeeded" in proc.stdout, tail
    layer = clone / ".aws-sam" / "build" / "ThreadsLayer" / "python"
    assert (layer / "threads_aws" / "__init__.py").is_file()
    assert list(layer.glob("orjson*/*.cpython-313-aarch64-linux-gnu.so")), "no cp313 aarch64 orjson"
    assert (clone / ".bin" / "python3.13").exists()
    assert not (clone / ".venv" / "bin" / "python3.13").exists()
    assert (clone / ".aws-sam" / "build" / "template.yaml").is_file()


# ------------------------------------------------------------------ sam deploy --guided


def test_guided_deploy_asks_exactly_the_readmes_prompts(tmp_path: Path, moto_url: str) -> None:
    pexpect = pytest.importorskip("pexpect")
    table = guided_table()
    for name in ("template.yaml", "samconfig.toml"):
        shutil.copy2(REPO / name, tmp_path / name)
    child = pexpect.spawn(
        str(VENV_BIN / "sam"),
        ["deploy", "--guided"],
        cwd=str(tmp_path),
        env=_moto_env(tmp_path, moto_url),
        encoding="utf-8",
        timeout=300,
    )
    asked: list[str] = []
    transcript: list[str] = []
    try:
        while True:
            i = child.expect([r"\]: ", "Looking for resources needed for deployment", pexpect.EOF])
            transcript.append(ANSI.sub("", child.before or ""))
            if i != 0:
                break
            prompt = transcript[-1].splitlines()[-1].strip() + "]"
            assert prompt in table, (f"SAM asks {prompt!r}, README's table doesn't list it", transcript)
            asked.append(prompt)
            child.sendline(table[prompt])
        assert i == 1, ("SAM stopped before its first AWS call", "".join(transcript)[-3000:])
    finally:
        child.close(force=True)
    # everything up to the changeset, in the README's order
    assert asked == [p for p in table if not p.startswith("Deploy this changeset")]


# ------------------------------------------------------------------ the first key


def test_first_key_block_sets_url_and_token(tmp_path: Path, moto_url: str, monkeypatch) -> None:
    import boto3
    from threads_aws.host.keys import ApiKeys
    from threads_aws.store.api_keys import ApiKeyRows
    from threads_aws_dev.local.infra import create_resources

    env = _moto_env(tmp_path, moto_url)
    for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(k, env[k])
    session = boto3.Session(region_name="us-east-1")
    resources = create_resources(REPO / "template.yaml", session, prefix="threads-readme")
    table = resources.physical["StateTable"]
    url = "https://abc123.execute-api.us-east-1.amazonaws.com/dev"
    stack = {
        "Resources": {"Q": {"Type": "AWS::SQS::Queue"}},
        "Outputs": {"HostApiUrl": {"Value": url}, "StateTableName": {"Value": table}},
    }
    session.client("cloudformation").create_stack(StackName="threads-aws", TemplateBody=json.dumps(stack))
    script = block_with('echo "$URL"') + '\nprintf "%s\\n" "$TOKEN"'
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,  # no samconfig.toml, no region in the environment: the block's default
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed_url, token = proc.stdout.splitlines()[-2:]
    assert printed_url == url
    found = ApiKeys(ApiKeyRows(session.client("dynamodb"), table)).lookup(token)
    assert found is not None and (found.tenant, found.subject) == ("acme", "alice")
