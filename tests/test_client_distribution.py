"""threads_aws_client as a user installs it: its hints resolve at run time (tools that read
annotations — `typing.get_type_hints`, pydantic, typeguard — see the types, not NameError), its
wheel ships `py.typed`, and it declares exactly the distributions its code imports."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
import typing
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from threads_aws_client import AsyncClient, AsyncEventStream, AsyncRunStream, Client, EventStream, RunStream

REPO = Path(__file__).resolve().parents[1]


def public_callables(cls: type) -> dict[str, typing.Any]:
    out = {}
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name != "__init__":
            continue
        fn = member.fget if isinstance(member, property) else member
        if callable(fn) and not inspect.isclass(fn):
            out[name] = fn
    return out


@pytest.mark.parametrize(
    "cls", [Client, AsyncClient, RunStream, EventStream, AsyncRunStream, AsyncEventStream]
)
def test_every_public_method_has_hints_that_resolve(cls: type) -> None:
    methods = public_callables(cls)
    assert len(methods) > 3
    for name, fn in methods.items():
        hints = typing.get_type_hints(fn)  # NameError if a name is only imported for type checking
        assert "return" in hints or name == "__init__", name


def test_a_route_method_returns_the_body_not_the_call() -> None:
    from threads_aws_client.types import PendingApproval, RunAccepted

    assert typing.get_type_hints(Client.approvals)["return"] == list[PendingApproval]
    assert typing.get_type_hints(AsyncClient.start_run)["return"] is RunAccepted
    assert typing.get_type_hints(Client.start_run)["thread_id"] == str | None


def dist_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(out),
            str(REPO / "clients/python"),
        ],
        check=True,
        capture_output=True,
    )
    (whl,) = out.glob("threads_aws_client-*.whl")
    return zipfile.ZipFile(whl)


def test_the_wheel_ships_py_typed(wheel: zipfile.ZipFile) -> None:
    assert "threads_aws_client/py.typed" in wheel.namelist()


def test_the_wheel_requires_exactly_what_its_code_imports(wheel: zipfile.ZipFile) -> None:
    imported: set[str] = set()
    for name in wheel.namelist():
        if not name.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(wheel.read(name))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"threads_aws_client"}
    owners = packages_distributions()
    needed = {dist_name(d) for mod in third_party for d in owners[mod]}
    meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    declared = {
        dist_name(re.split(r"[ <>=!~;\[(]", line.split(":", 1)[1].strip())[0])
        for line in wheel.read(meta).decode().splitlines()
        if line.startswith("Requires-Dist:")
    }
    assert needed == declared == {"httpx", "httpx-sse"}
