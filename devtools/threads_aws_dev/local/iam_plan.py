"""template.yaml's IAM as `threads-aws dev` enforces it (`local.iam`): the SAM translator's
expansion (cached by the template's sha256) and each function's role resolved against the
resources dev creates (table, bucket and queue names, function names, the template's
conditions and parameter defaults)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .infra import ACCOUNT, Unresolved, load_template, pseudo_parameters, resolve

# The AWS managed policies SAM attaches to function roles, as AWS publishes them (moto's copy
# of AWS's list: parsing all 1,582 of them costs 3 s, so only these three are kept here).
AWS_MANAGED = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": [
        {
            "Effect": "Allow",
            "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": "*",
        }
    ],
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess": [
        {
            "Effect": "Allow",
            "Action": [
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
                "xray:GetSamplingRules",
                "xray:GetSamplingTargets",
                "xray:GetSamplingStatisticSummaries",
            ],
            "Resource": ["*"],
        }
    ],
    "arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole": [
        {
            "Effect": "Allow",
            "Action": [
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
                "logs:CreateLogGroup",
                "logs:CreateLogStream",
                "logs:PutLogEvents",
            ],
            "Resource": "*",
        }
    ],
}


# ---------------------------------------------------------------- 1. the SAM expansion


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "threads-aws" / "iam"


def expand(template_path: str | os.PathLike[str]) -> dict[str, Any]:
    """The IAM part of the SAM translator's output: {"functions": {function: role logical id},
    "roles": {role: Properties}, "policies": {managed policy: Properties}} (unresolved)."""
    import samtranslator

    raw = Path(template_path).read_bytes()
    key = hashlib.sha256(raw + samtranslator.__version__.encode()).hexdigest()[:32]
    cached = _cache_dir() / f"{key}.json"
    try:
        return json.loads(cached.read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        pass
    out = _translate(template_path)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(cached.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(out))
        tmp.replace(cached)
    except OSError:  # a read-only home: translate again next time
        pass
    return out


def _translate(template_path: str | os.PathLike[str]) -> dict[str, Any]:
    import boto3
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    logging.getLogger("samtranslator").setLevel(logging.ERROR)
    doc = load_template(template_path)
    # The translator wants S3 code locations (`sam build` + package would put them there).
    for lid, res in doc["Resources"].items():
        props = res.get("Properties") or {}
        for k in ("CodeUri", "ContentUri"):
            if k in props:
                props[k] = f"s3://local/{lid}"
    ((doc.get("Globals") or {}).get("Function") or {}).pop("CodeUri", None)
    params = {k: p["Default"] for k, p in (doc.get("Parameters") or {}).items() if "Default" in p}
    params.update(pseudo_parameters("us-east-1", "threads-local"))
    session = boto3.Session(region_name="us-east-1")
    expanded = Translator({}, Parser(), boto_session=session).translate(
        doc, params, get_managed_policy_map=lambda: {}
    )
    res = expanded["Resources"]
    functions = {}
    for lid, r in res.items():
        role = (r.get("Properties") or {}).get("Role") if r.get("Type") == "AWS::Lambda::Function" else None
        if isinstance(role, dict) and "Fn::GetAtt" in role:
            functions[lid] = role["Fn::GetAtt"][0]
    return {
        "functions": functions,
        "roles": {k: r.get("Properties") or {} for k, r in res.items() if r.get("Type") == "AWS::IAM::Role"},
        "policies": {
            k: r.get("Properties") or {} for k, r in res.items() if r.get("Type") == "AWS::IAM::ManagedPolicy"
        },
    }


# ---------------------------------------------------------------- 2. resolved against dev's resources


_NO_VALUE = object()


def _drop_no_value(v: Any) -> Any:
    if isinstance(v, list):
        return [x for x in (_drop_no_value(y) for y in v) if x is not _NO_VALUE]
    if isinstance(v, dict):
        if v == {"Ref": "AWS::NoValue"}:
            return _NO_VALUE
        return {k: x for k, x in ((k, _drop_no_value(y)) for k, y in v.items()) if x is not _NO_VALUE}
    return v


def _role_name(lid: str, props: Mapping[str, Any], refs: Mapping[str, Any], prefix: str) -> str:
    """The template's RoleName (a role other resources name by it: the scheduler's), else
    `<prefix>-<logical id>` as CloudFormation would generate one."""

    def no_att(lid: str, name: str) -> str:
        raise Unresolved(f"{lid}.{name}")

    if "RoleName" in props:
        try:
            return str(resolve(props["RoleName"], refs, no_att))[:64]
        except Unresolved:
            pass
    return f"{prefix}-{lid}"[:64]


@dataclass
class RolePlan:
    function: str
    role: str  # its name in moto's IAM
    trust: dict[str, Any]
    inline: dict[str, dict[str, Any]]  # policy name -> document
    managed: dict[str, dict[str, Any]]  # customer managed policy name -> document
    aws_managed: list[str]  # ARNs (their documents: AWS_MANAGED)

    def documents(self) -> list[dict[str, Any]]:
        docs = [*self.inline.values(), *self.managed.values()]
        return docs + [{"Statement": AWS_MANAGED[a]} for a in self.aws_managed if a in AWS_MANAGED]


def plan(
    template_path: str | os.PathLike[str],
    physical: Mapping[str, str],
    function_names: Mapping[str, str],
    *,
    region: str,
    prefix: str,
) -> tuple[dict[str, RolePlan], list[str]]:
    """Each function's role, resolved (`function_names`: logical id -> the name dev invokes it
    by); and warnings (what could not be resolved)."""
    from .lwa import choose

    iam = expand(template_path)
    doc = load_template(template_path)
    params: dict[str, Any] = {}
    for k, p in (doc.get("Parameters") or {}).items():
        d = str(p.get("Default", ""))
        params[k] = d.split(",") if p.get("Type") == "CommaDelimitedList" else d
    cond_params = {k: ",".join(v) if isinstance(v, list) else v for k, v in params.items()}
    conditions = doc.get("Conditions") or {}
    policy_name = {lid: f"{prefix}-{lid}"[:128] for lid in iam["policies"]}
    role_name = {
        lid: _role_name(lid, props, {**params, **pseudo_parameters(region, prefix)}, prefix)
        for lid, props in iam["roles"].items()
    }
    refs: dict[str, Any] = {
        **params,
        **pseudo_parameters(region, prefix),
        **physical,
        **function_names,
        **{lid: f"arn:aws:iam::{ACCOUNT}:policy/{n}" for lid, n in policy_name.items()},
        **role_name,
    }
    kinds = {lid: r.get("Type", "") for lid, r in doc["Resources"].items()}

    def att(lid: str, name: str) -> str:
        kind = kinds.get(lid, "")
        if lid in function_names:
            return f"arn:aws:lambda:{region}:{ACCOUNT}:function:{function_names[lid]}"
        if lid in role_name:
            return f"arn:aws:iam::{ACCOUNT}:role/{role_name[lid]}"
        if lid not in physical:  # not created locally (log groups, topics): matches nothing here
            return f"arn:aws:local:{region}:{ACCOUNT}:{lid}"
        ref = physical[lid]
        if kind == "AWS::SQS::Queue":
            qname = ref.rstrip("/").rsplit("/", 1)[-1]
            return {"QueueName": qname, "QueueUrl": ref}.get(name, f"arn:aws:sqs:{region}:{ACCOUNT}:{qname}")
        if kind == "AWS::DynamoDB::Table":
            return f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{ref}"
        if kind == "AWS::S3::Bucket":
            return f"arn:aws:s3:::{ref}"
        raise Unresolved(f"{lid}.{name}")

    warnings: list[str] = []

    def resolved(v: Any, where: str) -> Any:
        try:
            return resolve(_drop_no_value(choose(v, conditions, cond_params)), refs, att)
        except (Unresolved, ValueError, KeyError) as exc:
            warnings.append(f"IAM: {where} not resolved locally ({exc}); left out")
            return None

    managed = {}
    for lid, p in iam["policies"].items():
        if lid in kinds and "Condition" in doc["Resources"][lid]:
            from .lwa import condition

            if not condition(doc["Resources"][lid]["Condition"], conditions, cond_params):
                continue
        d = resolved(p.get("PolicyDocument"), lid)
        if d is not None:
            managed[refs[lid]] = (policy_name[lid], d)
    out: dict[str, RolePlan] = {}
    for fn, role in iam["functions"].items():
        props = iam["roles"].get(role) or {}
        inline = {}
        for pol in props.get("Policies") or []:
            d = resolved(pol.get("PolicyDocument"), f"{role}.{pol.get('PolicyName')}")
            if d is not None:
                inline[str(pol.get("PolicyName"))] = d
        arns = resolved(props.get("ManagedPolicyArns") or [], f"{role}.ManagedPolicyArns") or []
        out[fn] = RolePlan(
            function=fn,
            role=role_name[role],
            trust=resolved(props.get("AssumeRolePolicyDocument"), role) or {},
            inline=inline,
            managed={managed[a][0]: managed[a][1] for a in arns if a in managed},
            aws_managed=[a for a in arns if a.startswith("arn:aws:iam::aws:")],
        )
    return out, warnings


def hash_keys(template_path: str | os.PathLike[str], physical: Mapping[str, str]) -> dict[str, str]:
    """Table name -> its partition key attribute (dynamodb:LeadingKeys)."""
    out = {}
    for lid, r in load_template(template_path)["Resources"].items():
        if r.get("Type") == "AWS::DynamoDB::Table" and lid in physical:
            for k in (r.get("Properties") or {}).get("KeySchema") or ():
                if k.get("KeyType") == "HASH":
                    out[physical[lid]] = str(k["AttributeName"])
    return out
