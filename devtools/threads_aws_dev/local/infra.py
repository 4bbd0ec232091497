"""Create template.yaml's tables, bucket and queues through boto3 (moto in tests, or any
endpoint for local runs), so local and tests can't drift from the template.

``create_resources`` parses the CloudFormation YAML (``!Ref``/``!Sub``/``!GetAtt``/... tags are
read permissively) and creates every AWS::DynamoDB::Table (key schema, GSIs/LSIs, billing,
SSE, TTL, PITR), AWS::S3::Bucket (encryption, public access block, versioning) and
AWS::SQS::Queue (FIFO attributes, SSE, redrive to the DLQ it references) with the declared
properties. Other resource types are skipped. Physical names are deterministic:
``<prefix>-<logical-id-in-kebab-case>`` (``.fifo`` appended for FIFO queues), overridable per
logical id with ``names``.

Lambda reads the same names from the environment: ``store.names.ResourceNames.from_env()``.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from threads_aws.store.names import ROLES, ResourceNames

# ---------------------------------------------------------------- template parsing


def _cfn_loader() -> type:
    import yaml

    # libyaml's parser where PyYAML has it: the pure-Python one takes ~1 s for template.yaml
    # (3,000 lines), and every moto-backed test and every `threads-aws dev` start loads it
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class CfnLoader(base):  # type: ignore[misc,valid-type]
        pass

    def construct(loader: Any, suffix: str, node: Any) -> dict[str, Any]:
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        if suffix == "Ref":
            return {"Ref": value}
        if suffix == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
        return {f"Fn::{suffix}": value}

    CfnLoader.add_multi_constructor("!", construct)
    return CfnLoader


def load_template(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed template (a fresh copy: callers may change it). Parsed once per file version
    in a process (keyed by path, mtime and size)."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_mtime_ns, st.st_size)
    if key not in _parsed:
        _parsed.clear()
        _parsed[key] = _parse_template(path)
    return copy.deepcopy(_parsed[key])


_parsed: dict[tuple[str, int, int], dict[str, Any]] = {}


def _parse_template(path: str | os.PathLike[str]) -> dict[str, Any]:
    import yaml

    with open(path, encoding="utf-8") as fh:
        doc = yaml.load(fh, Loader=_cfn_loader())  # noqa: S506 - a SafeLoader subclass
    if not isinstance(doc, dict) or "Resources" not in doc:
        raise ValueError(f"{path}: not a CloudFormation template")
    return doc


def default_template_path() -> Path:
    """template.yaml of the repo this package is installed from (editable), or of the cwd."""
    here = Path(__file__).resolve()
    for parent in [Path.cwd(), *here.parents]:
        candidate = parent / "template.yaml"
        if candidate.is_file():
            return candidate
    raise FileNotFoundError("template.yaml not found")


def physical_name(prefix: str, logical_id: str) -> str:
    kebab = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "-", logical_id).lower()
    return f"{prefix}-{kebab}"


ACCOUNT = "123456789012"  # the account id an emulated (moto/local) deployment reports


class Unresolved(Exception):
    """A Ref/GetAtt/Sub names something not (yet) known."""


def pseudo_parameters(region: str, stack_name: str) -> dict[str, str]:
    return {
        "AWS::Region": region,
        "AWS::StackName": stack_name,
        "AWS::AccountId": ACCOUNT,
        "AWS::Partition": "aws",
        "AWS::URLSuffix": "amazonaws.com",
    }


def resolve(v: Any, refs: Mapping[str, str], att: Callable[[str, str], str]) -> Any:
    """Resolve the intrinsics the template uses (Ref, Fn::GetAtt, Fn::Sub, Fn::Join) against
    `refs` (parameters, pseudo parameters, physical names) and `att(logical_id, attribute)`;
    anything unknown raises Unresolved. The one resolver for resource creation and the local
    gateway's function environments."""
    if isinstance(v, list):
        return [resolve(x, refs, att) for x in v]
    if not isinstance(v, dict):
        return v
    if len(v) == 1:
        ((k, arg),) = v.items()
        if k == "Ref":
            if arg not in refs:
                raise Unresolved(arg)
            return refs[arg]
        if k == "Fn::GetAtt":
            lid, name = arg if isinstance(arg, list) else arg.split(".", 1)
            return att(lid, name)
        if k == "Fn::Sub":
            text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], resolve(arg[1], refs, att))

            def sub(m: re.Match[str]) -> str:
                key = m.group(1)
                if key in extra:
                    return str(extra[key])
                if "." in key:
                    return att(*key.split(".", 1))
                if key in refs:
                    return refs[key]
                raise Unresolved(key)

            return re.sub(r"\$\{([^}!]+)\}", sub, text)
        if k == "Fn::Join":
            sep, parts = arg
            return sep.join(str(x) for x in resolve(parts, refs, att))
    return {k: resolve(x, refs, att) for k, x in v.items()}


class _Ctx:
    """Refs and attributes of the resources created so far."""

    def __init__(self, doc: dict[str, Any], region: str, stack_name: str) -> None:
        self.refs: dict[str, str] = pseudo_parameters(region, stack_name)
        for name, p in (doc.get("Parameters") or {}).items():
            if "Default" in p:
                self.refs[name] = str(p["Default"])
        self.atts: dict[str, dict[str, str]] = {}

    def att(self, lid: str, name: str) -> str:
        if name not in self.atts.get(lid, {}):
            raise Unresolved(lid)
        return self.atts[lid][name]

    def resolve(self, v: Any) -> Any:
        return resolve(v, self.refs, self.att)


# ---------------------------------------------------------------- clients


def _clients(session_or_clients: Any, region: str | None) -> dict[str, Any]:
    if isinstance(session_or_clients, Mapping):
        return dict(session_or_clients)
    if hasattr(session_or_clients, "client"):
        kw = {"region_name": region} if region else {}
        return {svc: session_or_clients.client(svc, **kw) for svc in ("dynamodb", "s3", "sqs")}
    return {svc: getattr(session_or_clients, svc) for svc in ("dynamodb", "s3", "sqs")}


def _bool(v: Any) -> bool:
    return v is True or str(v).lower() == "true"


# ---------------------------------------------------------------- creators


def _create_table(ddb: Any, name: str, p: dict[str, Any]) -> dict[str, str]:
    billing = p.get("BillingMode", "PROVISIONED")
    kw: dict[str, Any] = {
        "TableName": name,
        "KeySchema": p["KeySchema"],
        "AttributeDefinitions": p["AttributeDefinitions"],
        "BillingMode": billing,
    }
    if billing == "PROVISIONED":
        kw["ProvisionedThroughput"] = {k: int(v) for k, v in p["ProvisionedThroughput"].items()}

    def index(ix: dict[str, Any], gsi: bool) -> dict[str, Any]:
        out = {
            "IndexName": ix["IndexName"],
            "KeySchema": ix["KeySchema"],
            "Projection": ix.get("Projection", {"ProjectionType": "ALL"}),
        }
        if gsi and billing == "PROVISIONED":
            out["ProvisionedThroughput"] = {k: int(v) for k, v in ix["ProvisionedThroughput"].items()}
        return out

    if p.get("GlobalSecondaryIndexes"):
        kw["GlobalSecondaryIndexes"] = [index(ix, True) for ix in p["GlobalSecondaryIndexes"]]
    if p.get("LocalSecondaryIndexes"):
        kw["LocalSecondaryIndexes"] = [index(ix, False) for ix in p["LocalSecondaryIndexes"]]
    sse = p.get("SSESpecification")
    if sse:
        spec: dict[str, Any] = {"Enabled": _bool(sse.get("SSEEnabled"))}
        if sse.get("SSEType"):
            spec["SSEType"] = sse["SSEType"]
        if sse.get("KMSMasterKeyId"):
            spec["KMSMasterKeyId"] = sse["KMSMasterKeyId"]
        kw["SSESpecification"] = spec
    stream = p.get("StreamSpecification")
    if stream:
        kw["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    out = ddb.create_table(**kw)
    ttl = p.get("TimeToLiveSpecification")
    if ttl and _bool(ttl.get("Enabled")):
        ddb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]}
        )
    pitr = p.get("PointInTimeRecoverySpecification")
    if pitr and _bool(pitr.get("PointInTimeRecoveryEnabled")):
        ddb.update_continuous_backups(
            TableName=name, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True}
        )
    return {"Ref": name, "Arn": out["TableDescription"]["TableArn"]}


def _create_bucket(s3: Any, name: str, p: dict[str, Any], region: str) -> dict[str, str]:
    if region == "us-east-1":
        s3.create_bucket(Bucket=name)
    else:
        s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": region})
    enc = p.get("BucketEncryption")
    if enc:
        rules = []
        for rule in enc["ServerSideEncryptionConfiguration"]:
            out: dict[str, Any] = {}
            if "ServerSideEncryptionByDefault" in rule:  # CFN name -> API name
                out["ApplyServerSideEncryptionByDefault"] = rule["ServerSideEncryptionByDefault"]
            if "BucketKeyEnabled" in rule:
                out["BucketKeyEnabled"] = _bool(rule["BucketKeyEnabled"])
            rules.append(out)
        s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={"Rules": rules})
    pab = p.get("PublicAccessBlockConfiguration")
    if pab:
        s3.put_public_access_block(
            Bucket=name, PublicAccessBlockConfiguration={k: _bool(v) for k, v in pab.items()}
        )
    ver = (p.get("VersioningConfiguration") or {}).get("Status")
    if ver:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": ver})
    return {"Ref": name, "Arn": f"arn:aws:s3:::{name}", "DomainName": f"{name}.s3.amazonaws.com"}


_QUEUE_ATTRS = (
    "ContentBasedDeduplication",
    "DeduplicationScope",
    "DelaySeconds",
    "FifoQueue",
    "FifoThroughputLimit",
    "KmsDataKeyReusePeriodSeconds",
    "KmsMasterKeyId",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "SqsManagedSseEnabled",
    "VisibilityTimeout",
)


def _create_queue(sqs: Any, name: str, p: dict[str, Any]) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for k in _QUEUE_ATTRS:
        if k in p:
            v = p[k]
            attrs[k] = str(v).lower() if isinstance(v, bool) else str(v)
    if "RedrivePolicy" in p:
        attrs["RedrivePolicy"] = json.dumps(p["RedrivePolicy"])
    if _bool(p.get("FifoQueue")) and not name.endswith(".fifo"):
        name += ".fifo"
    url = sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return {"Ref": url, "Arn": arn, "QueueName": name, "QueueUrl": url}


_NAME_PROPS = {
    "AWS::DynamoDB::Table": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::SQS::Queue": "QueueName",
}


def create_resources(
    template_path: str | os.PathLike[str] | None,
    session_or_clients: Any,
    names: Mapping[str, str] | None = None,
    *,
    prefix: str = "threads",
    region: str | None = None,
) -> ResourceNames:
    """Create the template's tables, bucket and queues; return their physical names/urls.

    ``session_or_clients`` is a boto3 Session (or anything with ``.client(service)``), a mapping
    ``{"dynamodb": ..., "s3": ..., "sqs": ...}`` of clients, or an object with those attributes.
    """
    doc = load_template(template_path or default_template_path())
    clients = _clients(session_or_clients, region)
    region = region or clients["dynamodb"].meta.region_name or "us-east-1"
    ctx = _Ctx(doc, region, prefix)
    names = dict(names or {})
    pending = {lid: r for lid, r in doc["Resources"].items() if r.get("Type") in _NAME_PROPS}
    physical: dict[str, str] = {}
    while pending:
        progressed = False
        for lid, res in list(pending.items()):
            try:
                props = ctx.resolve(
                    {k: v for k, v in (res.get("Properties") or {}).items() if k != _NAME_PROPS[res["Type"]]}
                )
            except Unresolved:
                continue
            name = names.get(lid) or physical_name(prefix, lid)
            kind = res["Type"]
            if kind == "AWS::DynamoDB::Table":
                atts = _create_table(clients["dynamodb"], name, props)
            elif kind == "AWS::S3::Bucket":
                atts = _create_bucket(clients["s3"], name, props, region)
            else:
                atts = _create_queue(clients["sqs"], name, props)
            ctx.refs[lid] = atts["Ref"]
            ctx.atts[lid] = atts
            physical[lid] = atts["Ref"]
            del pending[lid]
            progressed = True
        if not progressed:
            raise ValueError(f"unresolvable references among {sorted(pending)}")
    fields = {attr: physical.get(lid) for attr, lid in ROLES.items()}
    required = ("events_table", "state_table", "bucket", "run_step_queue_url", "inbox_queue_url")
    missing = [ROLES[a] for a in required if not fields[a]]
    if missing:
        raise ValueError(f"template lacks {', '.join(missing)}")
    return ResourceNames(**fields, physical=physical)  # type: ignore[arg-type]
