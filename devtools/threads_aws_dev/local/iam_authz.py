"""What IAM decides for one request to the emulated AWS of `threads-aws dev` (`local.iam` sets it
up): which actions on which resources the request needs, and whether the caller's policies
allow every one of them.

Why not moto's own access control (`INITIAL_NO_AUTH_ACTION_COUNT`): moto 5.2 resolves a request's
resource only for S3, SQS, IAM and STS; DynamoDB, Lambda, Secrets Manager and Scheduler requests
are all checked against resource "*", which no resource-scoped Allow matches (a least-privilege
role is denied everything), and a TransactWriteItems is checked as `dynamodb:TransactWriteItems`,
an action AWS never asks for (it checks PutItem/UpdateItem/DeleteItem/ConditionCheckItem per
item). Its conditions know StringEquals only and pass every other operator. So the roles and
their credentials are moto's (IAM CreateRole, STS AssumeRole), and this module maps requests to
(action, resource, condition keys) as the AWS service authorization reference documents them
and evaluates identity policies: an explicit Deny wins, else some Allow must match action,
resource and every condition. Resource policies (the bucket's TLS-only Deny) are not evaluated.

A mapping this module lacks is evaluated against resource "*" and logged once (`unmapped`), so
a gap shows up as a denial that names it, never as a silent pass.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote

log = logging.getLogger("threads_aws_dev.local")


@dataclass(frozen=True)
class Need:
    """One permission a request needs: `dynamodb:PutItem` on a table ARN, with condition keys."""

    action: str
    resource: str
    context: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# ---------------------------------------------------------------- policy evaluation


def _statements(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    st = doc.get("Statement") or []
    return [st] if isinstance(st, dict) else list(st)


def _listed(v: Any) -> list[str]:
    return [v] if isinstance(v, str) else [str(x) for x in v or ()]


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str, fold: bool) -> re.Pattern[str]:
    rx = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(rx, re.S | (re.I if fold else 0))


def _like(pattern: str, value: str, *, fold: bool = False) -> bool:
    """IAM wildcards: * any run, ? one character (no character classes)."""
    if "*" not in pattern and "?" not in pattern:
        return pattern.lower() == value.lower() if fold else pattern == value
    return _compiled(pattern, fold).fullmatch(value) is not None


def _matches(st: Mapping[str, Any], key: str, value: str, *, fold: bool) -> bool:
    if key in st:
        return any(_like(p, value, fold=fold) for p in _listed(st[key]))
    not_key = "Not" + key
    if not_key in st:
        return not any(_like(p, value, fold=fold) for p in _listed(st[not_key]))
    return False


_OPS = {
    "StringEquals": lambda want, have: have == want,
    "StringNotEquals": lambda want, have: have != want,
    "StringLike": lambda want, have: _like(want, have),
    "StringNotLike": lambda want, have: not _like(want, have),
    "StringEqualsIgnoreCase": lambda want, have: have.lower() == want.lower(),
    "ArnEquals": lambda want, have: have == want,
    "ArnLike": lambda want, have: _like(want, have),
    "Bool": lambda want, have: have.lower() == want.lower(),
}


class UnknownCondition(Exception):
    """A condition operator this evaluator cannot decide (never silently passed)."""


def _condition_holds(op: str, key: str, wants: list[str], have: tuple[str, ...] | None) -> bool:
    qualifier, _, base = op.rpartition(":")
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    if base not in _OPS:
        raise UnknownCondition(f"{op} on {key}")
    test = _OPS[base]
    negated = base.startswith("StringNot")
    if have is None:  # the key is absent from the request
        return qualifier == "ForAllValues" or if_exists or negated

    def one(v: str) -> bool:
        results = [test(w, v) for w in wants]
        return all(results) if negated else any(results)

    if qualifier == "ForAllValues":
        return all(one(v) for v in have)
    if qualifier == "ForAnyValue":
        return any(one(v) for v in have)
    return all(one(v) for v in have) if negated else any(one(v) for v in have)


def _conditions_hold(cond: Mapping[str, Any] | None, context: Mapping[str, tuple[str, ...]]) -> bool:
    for op, keys in (cond or {}).items():
        for key, want in keys.items():
            have = next((v for k, v in context.items() if k.lower() == key.lower()), None)
            if not _condition_holds(op, key, _listed(want), have):
                return False
    return True


def decide(documents: Iterable[Mapping[str, Any]], need: Need) -> str:
    """ "Allow", "Deny" (an explicit Deny matched) or "ImplicitDeny" (no Allow matched)."""
    allowed = False
    for doc in documents:
        for st in _statements(doc):
            if not _matches(st, "Action", need.action, fold=True):
                continue
            if not _matches(st, "Resource", need.resource, fold=False):
                continue
            try:
                holds = _conditions_hold(st.get("Condition"), need.context)
            except UnknownCondition as exc:  # undecidable: an Allow doesn't apply, a Deny does
                log.warning("IAM: condition %s not evaluated locally", exc)
                holds = st.get("Effect") == "Deny"
            if not holds:
                continue
            if st.get("Effect") == "Deny":
                return "Deny"
            allowed = allowed or st.get("Effect") == "Allow"
    return "Allow" if allowed else "ImplicitDeny"


# ---------------------------------------------------------------- requests -> needs


_SCOPE = re.compile(r"Credential=([^/,\s]+)/[^/]*/([^/]*)/([^/]*)/")
_DDB_TXN = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
_SQS_BATCH = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}


@dataclass
class Request:
    """The parts of a signed request that authorization reads."""

    access_key: str
    region: str
    service: str
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Mapping[str, str]  # lower-case names
    body: bytes

    @classmethod
    def from_environ(cls, environ: Mapping[str, Any], body: bytes) -> Request | None:
        m = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
        if not m:
            return None
        headers = {
            k[5:].replace("_", "-").lower(): str(v) for k, v in environ.items() if k.startswith("HTTP_")
        }
        headers["content-type"] = str(environ.get("CONTENT_TYPE", ""))
        return cls(
            access_key=m.group(1),
            region=m.group(2),
            service=m.group(3).lower(),
            method=str(environ.get("REQUEST_METHOD", "GET")),
            path=str(environ.get("PATH_INFO", "/")),
            query=parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True),
            headers=headers,
            body=body,
        )

    def json(self) -> dict[str, Any]:
        try:
            doc = json.loads(self.body or b"{}")
        except ValueError:
            return {}
        return doc if isinstance(doc, dict) else {}

    def target(self) -> str:
        """The operation of a JSON (X-Amz-Target) or query (Action=) request."""
        target = self.headers.get("x-amz-target", "")
        if target:
            return target.rpartition(".")[2]
        if self.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            found = parse_qs(self.body.decode("utf-8", "replace")).get("Action")
            if found:
                return found[0]
        return (self.query.get("Action") or [""])[0]


@dataclass
class Mapper:
    """Needs of a request, against the account's resources (`hash_keys`: table name -> its
    partition key attribute, for dynamodb:LeadingKeys)."""

    account: str
    hash_keys: Mapping[str, str] = field(default_factory=dict)
    unmapped: set[str] = field(default_factory=set)

    def needs(self, r: Request) -> list[Need]:
        fn = getattr(self, f"_{r.service.replace('-', '_')}", None)
        found: list[Need] | None = fn(r) if fn is not None else None
        if found is None:
            op = r.target() or f"{r.method} {r.path}"
            what = f"{r.service}:{op}"
            if what not in self.unmapped:
                self.unmapped.add(what)
                log.warning("IAM: no resource mapping for %s; checked against resource *", what)
            return [Need(f"{r.service}:{r.target() or r.method}", "*")]
        return found

    # -- DynamoDB
    def _table(self, region: str, table: str, index: str | None = None) -> str:
        arn = f"arn:aws:dynamodb:{region}:{self.account}:table/{table}"
        return f"{arn}/index/{index}" if index else arn

    def _leading(self, table: str, key: Mapping[str, Any] | None) -> dict[str, tuple[str, ...]]:
        attr = self.hash_keys.get(table)
        value = (key or {}).get(attr) if attr else None
        if not isinstance(value, dict) or not value:
            return {}
        return {"dynamodb:LeadingKeys": (str(next(iter(value.values()))),)}

    def _dynamodb(self, r: Request) -> list[Need]:
        op, doc = r.target(), r.json()
        if op in ("TransactWriteItems", "TransactGetItems"):
            out = []
            for entry in doc.get("TransactItems") or ():
                kind, item = next(iter(entry.items()))
                action = "GetItem" if op == "TransactGetItems" else _DDB_TXN.get(kind, kind)
                table = item.get("TableName", "")
                keys = self._leading(table, item.get("Key") or item.get("Item"))
                out.append(Need(f"dynamodb:{action}", self._table(r.region, table), keys))
            return out
        if op in ("BatchGetItem", "BatchWriteItem"):
            return [Need(f"dynamodb:{op}", self._table(r.region, t)) for t in doc.get("RequestItems") or {}]
        if "TableName" not in doc:
            return [Need(f"dynamodb:{op}", "*")]
        table = str(doc["TableName"])
        keys = self._leading(table, doc.get("Key") or doc.get("Item"))
        return [Need(f"dynamodb:{op}", self._table(r.region, table, doc.get("IndexName")), keys)]

    # -- SQS
    def _sqs(self, r: Request) -> list[Need]:
        op = r.target()
        doc = (
            r.json()
            if r.headers.get("x-amz-target")
            else {k: v[0] for k, v in parse_qs(r.body.decode("utf-8", "replace")).items()}
        )
        url, name = doc.get("QueueUrl"), doc.get("QueueName")
        queue = str(url).rstrip("/").rsplit("/", 1)[-1] if url else name
        resource = f"arn:aws:sqs:{r.region}:{self.account}:{queue}" if queue else "*"
        return [Need(f"sqs:{_SQS_BATCH.get(op, op)}", resource)]

    # -- S3 (path-style, as boto3 addresses a custom endpoint)
    def _s3(self, r: Request) -> list[Need] | None:
        bucket, _, key = r.path.lstrip("/").partition("/")
        key = unquote(key)
        q, m = r.query, r.method
        if not bucket:
            return [Need("s3:ListAllMyBuckets", "*")]
        barn = f"arn:aws:s3:::{bucket}"
        if key:
            oarn = f"{barn}/{key}"
            if m in ("GET", "HEAD"):
                if "tagging" in q:
                    return [Need("s3:GetObjectTagging", oarn)]
                return [Need("s3:GetObjectVersion" if "versionId" in q else "s3:GetObject", oarn)]
            if m in ("PUT", "POST"):
                if "tagging" in q:
                    return [Need("s3:PutObjectTagging", oarn)]
                out = [Need("s3:PutObject", oarn)]
                src = r.headers.get("x-amz-copy-source")
                if src:
                    out.append(Need("s3:GetObject", "arn:aws:s3:::" + unquote(src.lstrip("/").split("?")[0])))
                return out
            if m == "DELETE":
                return [Need("s3:AbortMultipartUpload" if "uploadId" in q else "s3:DeleteObject", oarn)]
            return None
        if m == "POST" and "delete" in q:  # DeleteObjects: s3:DeleteObject on each key
            keys = re.findall(rb"<Key>(.*?)</Key>", r.body, flags=re.S)
            return [Need("s3:DeleteObject", f"{barn}/{k.decode()}") for k in keys] or [
                Need("s3:DeleteObject", barn)
            ]
        if m in ("GET", "HEAD"):
            for sub, action in (
                ("versions", "ListBucketVersions"),
                ("uploads", "ListBucketMultipartUploads"),
            ):
                if sub in q:
                    return [Need(f"s3:{action}", barn)]
            if "location" in q:
                return [Need("s3:GetBucketLocation", barn)]
            if not q or "list-type" in q or "prefix" in q or m == "HEAD":
                return [Need("s3:ListBucket", barn)]
        if m == "PUT" and not q:
            return [Need("s3:CreateBucket", barn)]
        return None

    # -- EventBridge Scheduler (rest-json: /schedules/{Name}?groupName=)
    def _scheduler(self, r: Request) -> list[Need] | None:
        parts = [unquote(p) for p in r.path.strip("/").split("/")]
        if parts[0] != "schedules":
            return None
        if len(parts) == 1:
            return [Need("scheduler:ListSchedules", "*")]
        doc = r.json()
        group = (r.query.get("groupName") or [str(doc.get("GroupName") or "default")])[0]
        arn = f"arn:aws:scheduler:{r.region}:{self.account}:schedule/{group}/{parts[1]}"
        verb = {"POST": "Create", "PUT": "Update", "GET": "Get", "DELETE": "Delete"}.get(r.method)
        if verb is None:
            return None
        out = [Need(f"scheduler:{verb}Schedule", arn)]
        role = (doc.get("Target") or {}).get("RoleArn")
        if verb in ("Create", "Update") and role:
            out.append(Need("iam:PassRole", str(role), {"iam:PassedToService": ("scheduler.amazonaws.com",)}))
        return out

    # -- Secrets Manager, SSM parameters, STS
    def _secretsmanager(self, r: Request) -> list[Need]:
        sid = str(r.json().get("SecretId") or "")
        arn = (
            sid
            if sid.startswith("arn:")
            else f"arn:aws:secretsmanager:{r.region}:{self.account}:secret:{sid}"
        )
        return [Need(f"secretsmanager:{r.target()}", arn if sid else "*")]

    def _ssm(self, r: Request) -> list[Need]:
        name = str(r.json().get("Name") or "").lstrip("/")
        arn = f"arn:aws:ssm:{r.region}:{self.account}:parameter/{name}" if name else "*"
        return [Need(f"ssm:{r.target()}", arn)]

    def _sts(self, r: Request) -> list[Need]:
        return [] if r.target() == "GetCallerIdentity" else [Need(f"sts:{r.target()}", "*")]


def lambda_needs(region: str, account: str, function_name: str) -> list[Need]:
    """lambda:InvokeFunction on the function (by name or ARN, as the Invoke API takes it)."""
    name = function_name.split(":")[6] if function_name.startswith("arn:") else function_name
    return [Need("lambda:InvokeFunction", f"arn:aws:lambda:{region}:{account}:function:{name}")]


# ---------------------------------------------------------------- denials, as each service answers


def denial(
    service: str, principal: str, need: Need, decision: str
) -> tuple[str, list[tuple[str, str]], bytes]:
    """A WSGI (status, headers, body) that boto3 reads as AccessDenied(Exception) of `service`."""
    why = "with an explicit deny" if decision == "Deny" else "because no identity-based policy allows it"
    msg = f"User: {principal} is not authorized to perform: {need.action} on resource: {need.resource} {why}"
    if service == "s3":
        xml = f"<?xml version='1.0'?><Error><Code>AccessDenied</Code><Message>{msg}</Message></Error>"
        return "403 Forbidden", [("Content-Type", "application/xml")], xml.encode()
    headers = [("Content-Type", "application/x-amz-json-1.0"), ("x-amzn-ErrorType", "AccessDeniedException")]
    if service == "sqs":
        headers.append(("x-amzn-query-error", "AccessDenied;Sender"))
    body = {"__type": "AccessDeniedException", "message": msg, "Message": msg}
    return (
        ("403 Forbidden" if service != "dynamodb" else "400 Bad Request"),
        headers,
        json.dumps(body).encode(),
    )


def unknown_key(service: str) -> tuple[str, list[tuple[str, str]], bytes]:
    msg = "The security token included in the request is invalid."
    if service == "s3":
        xml = f"<Error><Code>InvalidAccessKeyId</Code><Message>{msg}</Message></Error>"
        return "403 Forbidden", [("Content-Type", "application/xml")], xml.encode()
    body = {"__type": "UnrecognizedClientException", "message": msg}
    headers = [
        ("Content-Type", "application/x-amz-json-1.0"),
        ("x-amzn-ErrorType", "UnrecognizedClientException"),
    ]
    return "400 Bad Request", headers, json.dumps(body).encode()
