"""What the local gateway needs to know from template.yaml: the functions (code, handler,
timeout, environment), their Api and SQS event sources, the Api's authorizers and gateway
responses. Read with the same CloudFormation loader as `local.infra`, resolved against the
physical names `local.infra.create_resources` gave the data plane."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .infra import ACCOUNT, Unresolved, load_template, pseudo_parameters, resolve

ENDPOINT_VAR = "AWS_ENDPOINT_URL"  # boto3's endpoint: the local host sets its own


@dataclass(frozen=True)
class Function:
    logical_id: str
    code_dir: Path  # CodeUri, absolute
    handler: str  # "app.handler": module path inside code_dir, then the attribute
    timeout_s: int
    memory_mb: int
    environment: Mapping[str, Any]  # unresolved values (Ref/Sub/...)
    asgi: str | None = None  # a Lambda Web Adapter function's app, "module:attr" (local.lwa)
    function_name: Any = None  # its FunctionName property, unresolved (None: the logical id)

    def arn(self, region: str) -> str:
        return f"arn:aws:lambda:{region}:{ACCOUNT}:function:{self.logical_id}"


@dataclass(frozen=True)
class ApiRoute:
    function: str  # logical id
    event: str  # the event's name in Events
    api: str  # logical id of the AWS::Serverless::Api ("" for the implicit one)
    path: str  # "/v1/threads/{thread_id}"
    method: str  # "GET", ... or "ANY"
    authorizer: str | None  # name in the Api's Authorizers; None: open
    stream: bool = False  # integration responseTransferMode STREAM (local.lwa)


@dataclass(frozen=True)
class SqsSource:
    function: str
    event: str
    queue: str  # logical id of the AWS::SQS::Queue
    batch_size: int
    report_failures: bool  # FunctionResponseTypes: [ReportBatchItemFailures]
    enabled: bool = True


@dataclass(frozen=True)
class ScheduleSource:
    """A `Schedule` event (an EventBridge rule's rate or cron): `local.timers` runs the rates."""

    function: str
    event: str
    expression: str  # rate(1 hour), cron(...)


@dataclass(frozen=True)
class Authorizer:
    name: str
    function: str  # logical id of its Lambda
    payload: str  # "REQUEST" or "TOKEN"
    headers: tuple[str, ...] = ()  # Identity.Headers: required identity sources
    query: tuple[str, ...] = ()  # Identity.QueryStrings
    token_header: str = "Authorization"  # TOKEN authorizers


@dataclass(frozen=True)
class GatewayResponse:
    status: int | None
    headers: Mapping[str, str]
    templates: Mapping[str, str]


@dataclass(frozen=True)
class Api:
    logical_id: str
    stage: str
    default_authorizer: str | None
    authorizers: Mapping[str, Authorizer]
    gateway_responses: Mapping[str, GatewayResponse]
    binary_media_types: tuple[str, ...] = ()
    throttle: tuple[float, int] | None = None  # MethodSettings "/*" "*": (rate per s, burst)


def _throttle(settings: Any, params: Mapping[str, Any]) -> tuple[float, int] | None:
    """The stage-wide throttle (the MethodSettings entry for every resource and method)."""
    for m in settings if isinstance(settings, list) else ():
        if not isinstance(m, dict) or m.get("ResourcePath", "/*") != "/*" or m.get("HttpMethod", "*") != "*":
            continue
        rate, burst = (
            params.get(v["Ref"]) if isinstance(v, dict) and "Ref" in v else v
            for v in (m.get("ThrottlingRateLimit"), m.get("ThrottlingBurstLimit"))
        )
        try:
            return float(str(rate)), int(str(burst))
        except ValueError:
            return None
    return None


@dataclass
class Template:
    path: Path
    functions: dict[str, Function] = field(default_factory=dict)
    routes: list[ApiRoute] = field(default_factory=list)
    sqs: list[SqsSource] = field(default_factory=list)
    schedules: list[ScheduleSource] = field(default_factory=list)
    apis: dict[str, Api] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # event sources we don't emulate
    parameters: dict[str, str] = field(default_factory=dict)
    global_env: Mapping[str, Any] = field(default_factory=dict)
    # functions with a FunctionUrlConfig: logical id -> the resource's Metadata (local.function_urls)
    function_urls: dict[str, Mapping[str, Any]] = field(default_factory=dict)


def _name(v: Any) -> str | None:
    """The logical id a !Ref / !GetAtt points at."""
    if isinstance(v, dict):
        if "Ref" in v:
            return str(v["Ref"])
        if "Fn::GetAtt" in v:
            arg = v["Fn::GetAtt"]
            return str(arg[0] if isinstance(arg, list) else arg.split(".", 1)[0])
    return None


def _str_or_param(v: Any, params: Mapping[str, str], default: str) -> str:
    if isinstance(v, str):
        return v
    ref = _name(v)
    if ref is not None and ref in params:
        return params[ref]
    return default


def _unquote(v: Any) -> str:
    s = str(v)
    return s[1:-1] if len(s) >= 2 and s[0] == s[-1] == "'" else s


def parse_template(path: str | os.PathLike[str], parameters: Mapping[str, str] | None = None) -> Template:
    """`parameters` override the template's parameter defaults (as `--parameter-overrides`)."""
    from . import lwa

    path = Path(path).resolve()
    doc = load_template(path)
    params = {k: str(p["Default"]) for k, p in (doc.get("Parameters") or {}).items() if "Default" in p}
    params.update(parameters or {})
    glob = (doc.get("Globals") or {}).get("Function") or {}
    glob_api = (doc.get("Globals") or {}).get("Api") or {}
    out = Template(
        path=path, parameters=params, global_env=(glob.get("Environment") or {}).get("Variables") or {}
    )
    resources = doc["Resources"]

    for lid, res in resources.items():
        if res.get("Type") != "AWS::Serverless::Api":
            continue
        p = {**glob_api, **(res.get("Properties") or {})}
        auth = p.get("Auth") or {}
        authorizers: dict[str, Authorizer] = {}
        for name, a in (auth.get("Authorizers") or {}).items():
            fn = _name(a.get("FunctionArn"))
            if fn is None:  # Cognito and friends: not emulated
                out.skipped.append(f"{lid}: authorizer {name} (not a Lambda authorizer)")
                continue
            ident = a.get("Identity") or {}
            payload = str(a.get("FunctionPayloadType") or "TOKEN").upper()
            authorizers[name] = Authorizer(
                name=name,
                function=fn,
                payload=payload,
                headers=tuple(ident.get("Headers") or ()),
                query=tuple(ident.get("QueryStrings") or ()),
                token_header=str(ident.get("Header") or "Authorization"),
            )
        responses: dict[str, GatewayResponse] = {}
        for kind, r in (p.get("GatewayResponses") or {}).items():
            rp = r.get("ResponseParameters") or {}
            headers = {str(k): _unquote(v) for k, v in (rp.get("Headers") or {}).items()}
            status = r.get("StatusCode")
            responses[str(kind)] = GatewayResponse(
                status=int(_unquote(status)) if status is not None else None,
                headers=headers,
                templates={str(k): str(v) for k, v in (r.get("ResponseTemplates") or {}).items()},
            )
        default = auth.get("DefaultAuthorizer")
        out.apis[lid] = Api(
            logical_id=lid,
            stage=_str_or_param(p.get("StageName"), params, "Prod"),
            default_authorizer=str(default) if default and default != "NONE" else None,
            authorizers=authorizers,
            gateway_responses=responses,
            binary_media_types=tuple(str(t).replace("~1", "/") for t in p.get("BinaryMediaTypes") or ()),
            throttle=_throttle(p.get("MethodSettings"), params),
        )

    for lid, res in resources.items():
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        p = {**glob, **(res.get("Properties") or {})}
        env = dict((glob.get("Environment") or {}).get("Variables") or {})
        env.update(((res.get("Properties") or {}).get("Environment") or {}).get("Variables") or {})
        code_uri = p.get("CodeUri")
        if not isinstance(code_uri, str) or not isinstance(p.get("Handler"), str):
            out.skipped.append(f"{lid}: no local CodeUri/Handler")
            continue
        out.functions[lid] = Function(
            logical_id=lid,
            code_dir=(path.parent / code_uri).resolve(),
            handler=p["Handler"],
            timeout_s=int(p.get("Timeout") or 3),
            memory_mb=int(p.get("MemorySize") or 128),
            environment=env,
            asgi=lwa.asgi_target((path.parent / code_uri).resolve(), p["Handler"], env),
            function_name=(res.get("Properties") or {}).get("FunctionName"),
        )
        for ev_name, ev in (p.get("Events") or {}).items():
            kind = ev.get("Type")
            ep = ev.get("Properties") or {}
            if kind == "Api":
                api = _name(ep.get("RestApiId")) or ""
                if api not in out.apis:  # the implicit API: no auth, default responses
                    out.apis.setdefault(api, Api(api, "Prod", None, {}, {}))
                ev_auth = (ep.get("Auth") or {}).get("Authorizer")
                authorizer = out.apis[api].default_authorizer if ev_auth is None else ev_auth
                out.routes.append(
                    ApiRoute(
                        function=lid,
                        event=ev_name,
                        api=api,
                        path=str(ep["Path"]),
                        method=str(ep.get("Method", "ANY")).upper(),
                        authorizer=None if authorizer in (None, "NONE", "AWS_IAM") else str(authorizer),
                    )
                )
            elif kind == "SQS":
                queue = _name(ep.get("Queue"))
                if queue is None:
                    out.skipped.append(f"{lid}.{ev_name}: SQS queue is not a template resource")
                    continue
                out.sqs.append(
                    SqsSource(
                        function=lid,
                        event=ev_name,
                        queue=queue,
                        batch_size=int(ep.get("BatchSize") or 10),
                        report_failures="ReportBatchItemFailures" in (ep.get("FunctionResponseTypes") or ()),
                        enabled=ep.get("Enabled", True) not in (False, "false", "False"),
                    )
                )
            elif kind == "Schedule":
                expression = _str_or_param(ep.get("Schedule"), params, "")
                out.schedules.append(ScheduleSource(function=lid, event=ev_name, expression=expression))
            else:
                out.skipped.append(f"{lid}.{ev_name}: event type {kind} not emulated")
        if p.get("FunctionUrlConfig"):
            out.function_urls[lid] = res.get("Metadata") or {}
    for lid, res in resources.items():  # routes an Api declares in its inline DefinitionBody
        body = (res.get("Properties") or {}).get("DefinitionBody")
        if res.get("Type") != "AWS::Serverless::Api" or lid not in out.apis or not isinstance(body, dict):
            continue
        conditions = doc.get("Conditions") or {}
        for r in lwa.definition_routes(body, conditions, params, out.apis[lid].default_authorizer):
            route = ApiRoute(r.function, "DefinitionBody", lid, r.path, r.method, r.authorizer, r.stream)
            out.routes.append(route)
    return out


# ---------------------------------------------------------------- environment


def _att(lid: str, att: str, refs: Mapping[str, str], region: str) -> str:
    if lid not in refs:
        raise Unresolved(lid)
    name = refs[lid]
    if att == "Arn":
        if name.startswith("http"):  # a queue url
            return f"arn:aws:sqs:{region}:{ACCOUNT}:{name.rsplit('/', 1)[-1]}"
        return f"arn:aws:local:{region}:{ACCOUNT}:{name}"
    if att in ("QueueName", "Name"):
        return name.rsplit("/", 1)[-1]
    return name


def _resolver(
    tpl: Template, physical: Mapping[str, str], region: str, stack: str
) -> Callable[[Function, str, Any], str]:
    """A function's variable value resolved against the local resources (Unresolved if it names
    something not created locally)."""
    refs = {
        **tpl.parameters,
        **pseudo_parameters(region, stack),
        **{lid: lid for lid in tpl.functions},
        **physical,
    }

    def att(lid: str, name: str) -> str:
        return _att(lid, name, refs, region)

    def value(fn: Function, var: str, raw: Any) -> str:
        v = resolve(raw, refs, att)
        return str(v).lower() if isinstance(v, bool) else str(v)

    return value


def function_names(
    tpl: Template, physical: Mapping[str, str], region: str, stack: str = "threads"
) -> dict[str, str]:
    """Each explicit FunctionName, resolved as the functions' environment is, → its logical id
    (a function that another one invokes by the name the template gives it)."""
    resolved = _resolver(tpl, physical, region, stack)
    out: dict[str, str] = {}
    for fn in tpl.functions.values():
        if fn.function_name is None:
            continue
        try:
            out[resolved(fn, "FunctionName", fn.function_name)] = fn.logical_id
        except Unresolved:
            continue
    return out


def function_env(
    tpl: Template, physical: Mapping[str, str], region: str, stack: str = "threads"
) -> tuple[dict[str, str], list[str]]:
    """The union of every function's resolved environment, and warnings (unresolvable values,
    two functions wanting different values for one variable: all handlers share one process).
    AWS_ENDPOINT_URL is the local host's own (its moto), whatever the template declares."""
    resolved = _resolver(tpl, physical, region, stack)
    env: dict[str, str] = {}
    warnings: list[str] = []
    for fn in tpl.functions.values():
        for var, raw in fn.environment.items():
            if var == ENDPOINT_VAR:
                continue
            try:
                value = resolved(fn, var, raw)
            except Unresolved as exc:
                warnings.append(f"{fn.logical_id}: {var} refers to {exc.args[0]}, not created locally")
                continue
            if var in env and env[var] != value:
                warnings.append(
                    f"{fn.logical_id}: {var}={value!r} differs from another function's; kept the first"
                )
                continue
            env[var] = value
    return env, warnings


# ---------------------------------------------------------------- sam local


def sam_env_vars(
    tpl: Template,
    physical: Mapping[str, str],
    region: str,
    *,
    endpoint: str,
    local_endpoint: str,
    stack: str = "threads",
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The `sam local --env-vars` file for the emulated AWS at `local_endpoint` as containers
    reach it (`endpoint`): for every function, by logical id, every variable its template
    environment declares (Globals included), resolved against the local resources; queue URLs
    and AWS_ENDPOINT_URL point at `endpoint`. SAM sets only declared variables from this file,
    hence template.yaml declares AWS_ENDPOINT_URL (empty: boto3's own endpoints, when deployed).
    Also returns warnings (what a function's container won't get)."""
    resolved = _resolver(tpl, physical, region, stack)
    out: dict[str, dict[str, str]] = {}
    warnings: list[str] = []
    for lid, fn in tpl.functions.items():
        env: dict[str, str] = {}
        for var, raw in fn.environment.items():
            try:
                env[var] = resolved(fn, var, raw).replace(local_endpoint, endpoint)
            except Unresolved as exc:
                warnings.append(f"{lid}: {var} refers to {exc.args[0]}, not created locally")
        if ENDPOINT_VAR in fn.environment:
            env[ENDPOINT_VAR] = endpoint
        else:
            warnings.append(f"{lid}: {ENDPOINT_VAR} is not in its template environment (sam local needs it)")
        out[lid] = env
    return out, warnings
