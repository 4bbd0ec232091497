"""Each function under its own IAM role in `threads-aws dev`, as deployed.

Order of what happens, up front:
1. template.yaml is expanded (`iam_plan`) by the SAM translator (`aws-sam-translator`, as `sam deploy` does):
   every function gets its role (policy templates such as `DynamoDBCrudPolicy` become
   statements, `Policies: - !Ref HostReadPolicy` a managed policy ARN, an SQS event source
   AWSLambdaSQSQueueExecutionRole). The expansion is cached on disk by the template's sha256
   (the translator's import alone costs ~2 s).
2. The roles' documents are resolved against what dev created (table, bucket and queue names,
   function names, the template's conditions and parameter defaults), so resource-scoped
   statements name exactly the local resources.
3. On a function's first invocation its customer managed policies and its role are created in
   moto's IAM and assumed through moto's STS: the function's temporary credentials.
4. Every boto3 request signed while a function runs (`CURRENT`, set by `runtime.Handlers`) is
   signed with that function's credentials (botocore's per-request `request_credentials`), and
   the moto server in front (`AuthorizingApp`) evaluates the caller's policies for each action
   and resource the request needs (`iam_authz`): a request the role does not allow answers
   AccessDenied as AWS would, before moto applies (or the journal records) anything.

Requests signed with dev's own keys (the environment's `testing`: creating the template's
resources, replaying the state, minting the banner's key, the schedule ticker standing in for
EventBridge Scheduler) are not checked: they stand for CloudFormation and AWS's services.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .iam_authz import Mapper, Need, Request, decide, denial, lambda_needs, unknown_key
from .iam_plan import AWS_MANAGED, RolePlan, expand, hash_keys, plan
from .infra import ACCOUNT
from .moto_wsgi import WsgiServer, moto_app

log = logging.getLogger("threads_aws_dev.local")

# The function whose handler this thread (or task) is running; None: dev's own code.
CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("threads_local_function", default=None)

ADMIN_KEY = "testing"  # dev's own access key (the environment's): not checked


# ---------------------------------------------------------------- 3. roles and credentials in moto


@dataclass
class Principal:
    function: str
    arn: str  # arn:aws:sts::<account>:assumed-role/<role>/<function>
    documents: list[dict[str, Any]]


@dataclass
class LocalIam:
    """The functions' roles in moto and the checks in front of it (one per dev server)."""

    plans: dict[str, RolePlan]
    endpoint: str
    region: str
    hash_keys: Mapping[str, str] = field(default_factory=dict)
    denied: list[str] = field(default_factory=list)  # every denial, as its message
    checked: dict[str, int] = field(default_factory=dict)  # requests checked, by function
    setup_s: float = 0.0  # time spent creating and assuming roles (first use of each function)
    # --aws-only: sam local's containers sign with whatever keys SAM hands them (unchecked)
    other_keys_unchecked: bool = False
    _creds: dict[str, Any] = field(default_factory=dict)
    _principals: dict[str, Principal] = field(default_factory=dict)  # by access key id
    _made_policies: set[str] = field(default_factory=set)
    _admins: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _mapper: Mapper | None = None

    def _admin(self, service: str) -> Any:
        """dev's own client of moto's IAM or STS (made once: a client costs more than a call)."""
        import boto3

        if service in self._admins:
            return self._admins[service]
        session: Any = boto3.session.Session()
        self._admins[service] = client = session.client(
            service,
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=ADMIN_KEY,
            aws_secret_access_key=ADMIN_KEY,
        )
        return client

    def credentials(self, function: str) -> Any:
        """The function's temporary credentials (its role created and assumed on first use);
        None for a function without a role in the template."""
        with self._lock:
            if function in self._creds:
                return self._creds[function]
            token = CURRENT.set(None)  # these calls are dev's own
            started = time.perf_counter()
            try:
                self._creds[function] = creds = self._assume(function)
            finally:
                CURRENT.reset(token)
                self.setup_s += time.perf_counter() - started
            return creds

    def _assume(self, function: str) -> Any:
        from botocore.credentials import Credentials

        p = self.plans.get(function)
        if p is None:
            return None
        iam, sts = self._admin("iam"), self._admin("sts")
        arns = []
        for name, doc in p.managed.items():
            arn = f"arn:aws:iam::{ACCOUNT}:policy/{name}"
            if name not in self._made_policies:
                try:
                    iam.create_policy(PolicyName=name, PolicyDocument=json.dumps(doc))
                except iam.exceptions.EntityAlreadyExistsException:
                    pass
                self._made_policies.add(name)
            arns.append(arn)
        try:
            iam.create_role(RoleName=p.role, AssumeRolePolicyDocument=json.dumps(p.trust))
        except iam.exceptions.EntityAlreadyExistsException:
            pass
        for arn in arns:
            iam.attach_role_policy(RoleName=p.role, PolicyArn=arn)
        for name, doc in p.inline.items():
            # SAM writes no Version (AWS then reads 2008-10-17; moto refuses): the same without
            # policy variables, which these documents don't use.
            doc = {"Version": "2012-10-17", **doc}
            iam.put_role_policy(RoleName=p.role, PolicyName=name, PolicyDocument=json.dumps(doc))
        for arn in p.aws_managed:  # not in moto's IAM (loading AWS's list costs seconds): inline
            if arn in AWS_MANAGED:
                doc = {"Version": "2012-10-17", "Statement": AWS_MANAGED[arn]}
                iam.put_role_policy(
                    RoleName=p.role, PolicyName=arn.rsplit("/", 1)[1], PolicyDocument=json.dumps(doc)
                )
        role_arn = f"arn:aws:iam::{ACCOUNT}:role/{p.role}"
        got = sts.assume_role(RoleArn=role_arn, RoleSessionName=function[:64], DurationSeconds=43200)[
            "Credentials"
        ]
        arn = f"arn:aws:sts::{ACCOUNT}:assumed-role/{p.role}/{function[:64]}"
        self._principals[got["AccessKeyId"]] = Principal(function, arn, p.documents())
        return Credentials(
            got["AccessKeyId"], got["SecretAccessKey"], got["SessionToken"], method="sts-local"
        )

    def warm(self, functions: list[str]) -> None:
        """Create these functions' roles now (a background thread at start: the first request
        and the pollers' first receive then find them made)."""
        for fn in functions:
            try:
                self.credentials(fn)
            except Exception:  # noqa: BLE001 - the first use tries again and reports it
                log.warning("IAM: role of %s not created in advance", fn, exc_info=True)

    def client(self, function: str, service: str, **kw: Any) -> Any:
        """A boto3 client signing as `function` (the pollers: an event source mapping polls
        with its function's role)."""
        import boto3

        c = self.credentials(function)
        session: Any = boto3.session.Session()
        if c is not None:
            keys = {"aws_access_key_id": c.access_key, "aws_secret_access_key": c.secret_key}
            session = boto3.session.Session(**keys, aws_session_token=c.token)
        return session.client(service, region_name=self.region, **kw)

    # -- 4. checks
    def check(self, service: str, access_key: str, needs: Callable[[], list[Need]]) -> Any:
        """None if allowed (or dev's own key), else the WSGI (status, headers, body) to answer."""
        if access_key == ADMIN_KEY:
            return None
        who = self._principals.get(access_key)
        if who is None:
            return None if self.other_keys_unchecked else unknown_key(service)
        self.checked[who.function] = self.checked.get(who.function, 0) + 1
        for need in needs():
            decision = decide(who.documents, need)
            if decision != "Allow":
                answer = denial(service, who.arn, need, decision)
                msg = json.loads(answer[2]).get("message") if service != "s3" else answer[2].decode()
                self.denied.append(f"{who.function}: {msg}")
                log.warning("IAM: AccessDenied: %s (%s)", msg, who.function)
                return answer
        return None

    def mapper(self) -> Mapper:
        if self._mapper is None:
            self._mapper = Mapper(ACCOUNT, self.hash_keys)
        return self._mapper

    def check_invoke(self, access_key: str, function_name: str) -> Any:
        """The local Lambda Invoke API's check: lambda:InvokeFunction on the function."""
        return self.check("lambda", access_key, lambda: lambda_needs(self.region, ACCOUNT, function_name))

    def wrap(self, app: Callable[..., Any]) -> Callable[..., Any]:
        return AuthorizingApp(app, self)


class AuthorizingApp:
    """WSGI middleware in front of moto (outermost: a denied request reaches neither moto nor
    the state journal). Passes everything through until `iam` is set (the template's
    resources are created first, by dev's own key anyway)."""

    def __init__(self, app: Callable[..., Any], iam: LocalIam | None = None) -> None:
        self.app, self.iam = app, iam

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        from .persist_moto import read_body

        auth = environ.get("HTTP_AUTHORIZATION", "")
        if self.iam is None or not auth or f"Credential={ADMIN_KEY}/" in auth:
            return self.app(environ, start_response)
        body = read_body(environ)  # and rewinds wsgi.input for moto
        req = Request.from_environ(environ, body)
        if req is None:
            return self.app(environ, start_response)
        iam = self.iam
        answer = iam.check(req.service, req.access_key, lambda: iam.mapper().needs(req))
        if answer is None:
            return self.app(environ, start_response)
        status, headers, out = answer
        start_response(status, [*headers, ("Content-Length", str(len(out)))])
        return [out]


class MotoServer(WsgiServer):
    """moto with `AuthorizingApp` in front: `threads-aws dev --ephemeral`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self.front: AuthorizingApp | None = None

    def start(self) -> None:
        self.front = AuthorizingApp(moto_app())
        self.serve(self.front)


# ---------------------------------------------------------------- the signing hook


_active: list[LocalIam] = []
_hook_lock = threading.Lock()


def _before_sign(request: Any = None, **_: Any) -> None:
    fn = CURRENT.get()
    if fn is None or not _active or request is None:
        return
    # Only what goes to the emulated AWS: a request to a real endpoint (`dev --real-bedrock`) or
    # a provider fake keeps the credentials its client was made with.
    if not str(getattr(request, "url", "")).startswith(_active[-1].endpoint.rstrip("/") + "/"):
        return
    creds = _active[-1].credentials(fn)
    if creds is not None:
        request.context.setdefault("signing", {})["request_credentials"] = creds


def activate(iam: LocalIam) -> None:
    """Sign as the running function from now on: every botocore session created after this
    (the runtime's `Services` included, hence `services.reset()` here) carries the hook."""
    from botocore import handlers
    from threads_aws import services

    with _hook_lock:
        if not any(spec[1] is _before_sign for spec in handlers.BUILTIN_HANDLERS):
            handlers.BUILTIN_HANDLERS.append(("before-sign", _before_sign))
        _active.append(iam)
    services.reset()


def deactivate(iam: LocalIam) -> None:
    with _hook_lock:
        if iam in _active:
            _active.remove(iam)


def run_as(function: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call `fn` as `function` (its requests signed with the function's role)."""
    token = CURRENT.set(function)
    try:
        return fn(*args, **kwargs)
    finally:
        CURRENT.reset(token)


__all__ = [
    "CURRENT",
    "LocalIam",
    "RolePlan",
    "activate",
    "deactivate",
    "expand",
    "hash_keys",
    "plan",
    "run_as",
]
