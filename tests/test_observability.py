"""Logs and metrics of the functions (threads_aws.observability) through the real handlers on
moto: the library's log lines carry the invocation's keys, the correlation id travels with a
run step on SQS, and each invocation writes its metrics as CloudWatch EMF."""

from __future__ import annotations

import importlib.util
import io
import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from threads_aws import observability
from threads_aws.observability import CORRELATION_ATTRIBUTE, Metric

REPO = Path(__file__).resolve().parents[1]


def ctx(name: str) -> Any:
    return SimpleNamespace(
        function_name=name,
        function_version="$LATEST",
        memory_limit_in_mb=512,
        invoked_function_arn=f"arn:aws:lambda:us-east-1:123456789012:function:{name}",
        aws_request_id=f"{name}-invocation",
        get_remaining_time_in_millis=lambda: 25_000,
    )


def load_handler(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"obs_fn_{name}", REPO / "functions" / name / "app.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.handler


def sample(name: str) -> dict[str, Any]:
    return json.loads((REPO / "events" / f"{name}.json").read_text())


@pytest.fixture
def logs():
    """The JSON lines written through the Powertools handler during the test."""
    stream = io.StringIO()
    handler = observability.logger.registered_handler
    old = handler.setStream(stream)  # type: ignore[attr-defined]
    lines: list[dict[str, Any]] = []

    def read() -> list[dict[str, Any]]:
        lines.extend(json.loads(x) for x in stream.getvalue().splitlines() if x.strip())
        stream.seek(0)
        stream.truncate()
        return lines

    yield read
    handler.setStream(old)  # type: ignore[attr-defined]


def emf(out: str) -> list[dict[str, Any]]:
    """The EMF documents printed on stdout: {metric name: value(s), dimension: value, ...}."""
    docs = []
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            docs.append(json.loads(line))
    return docs


def metric_values(docs: list[dict[str, Any]], name: str, **dims: str) -> list[float]:
    out: list[float] = []
    for d in docs:
        names = {m["Name"] for block in d["_aws"]["CloudWatchMetrics"] for m in block["Metrics"]}
        if name in names and all(d.get(k) == v for k, v in dims.items()):
            v = d[name]
            out.extend(v if isinstance(v, list) else [v])
    return out


@pytest.fixture
def env(aws, monkeypatch):
    from threads_aws.host import runtime

    for k, v in aws.resources.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "1")
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    runtime.reset()
    yield aws
    runtime.reset()


def test_library_loggers_write_through_powertools_with_the_invocation_keys(logs):
    @observability.entry("api")
    def handler(event: dict[str, Any], context: Any) -> str:
        logging.getLogger("threads_aws.host").warning("inside %s", "the host")
        return "ok"

    ev = {"requestContext": {"requestId": "req-42"}, "pathParameters": {"thread_id": "t-1", "run_id": "r-1"}}
    assert handler(ev, ctx("get-timeline")) == "ok"
    assert handler({"requestContext": {"requestId": "req-43"}}, ctx("get-timeline")) == "ok"
    first, second = logs()
    assert first["message"] == "inside the host" and first["level"] == "WARNING"
    assert first["service"] == observability.SERVICE
    assert first["correlation_id"] == "req-42"
    assert (first["thread_id"], first["run_id"]) == ("t-1", "r-1")
    assert first["function_name"] == "get-timeline" and first["cold_start"] in (True, False)
    # The next invocation starts from fresh keys: nothing of the first one's ids.
    assert second["correlation_id"] == "req-43" and "thread_id" not in second and "run_id" not in second
    assert second["cold_start"] is False


def test_start_run_logs_and_counts_and_hands_its_correlation_id_to_the_worker(env, logs, capsys):
    ev = sample("start_run")
    ev["requestContext"]["requestId"] = "req-start-1"
    out = load_handler("start_run")(ev, ctx("start-run"))
    assert out["statusCode"] == 202
    assert metric_values(emf(capsys.readouterr().out), Metric.RUNS_ACCEPTED) == [1.0]

    got = env.sqs.receive_message(
        QueueUrl=env.resources.run_step_queue_url,
        MaxNumberOfMessages=10,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )["Messages"]
    assert len(got) == 1
    assert got[0]["MessageAttributes"][CORRELATION_ATTRIBUTE]["StringValue"] == "req-start-1"

    # The worker serves it (the record as Lambda's SQS event source shapes it, received twice).
    m = got[0]
    record = {
        "messageId": m["MessageId"],
        "receiptHandle": m["ReceiptHandle"],
        "body": m["Body"],
        "attributes": {**m["Attributes"], "ApproximateReceiveCount": "2"},
        "messageAttributes": {
            k: {"stringValue": v["StringValue"], "dataType": v["DataType"]}
            for k, v in m["MessageAttributes"].items()
        },
        "md5OfBody": m["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:run-step.fifo",
        "awsRegion": "us-east-1",
    }
    batch = load_handler("run_step")({"Records": [record]}, ctx("run-step"))
    assert batch == {"batchItemFailures": []}, logs()
    docs = emf(capsys.readouterr().out)
    states = [d["state"] for d in docs if "state" in d and Metric.STEPS in d]
    assert states and states[0] in ("idle", "parked")
    assert metric_values(docs, Metric.REDELIVERIES) == [1.0]
    assert metric_values(docs, Metric.EVENTS_APPENDED)[0] > 0
    assert len(metric_values(docs, Metric.STEP_DURATION, state=states[0])) == 1
    for d in docs:
        assert d["_aws"]["CloudWatchMetrics"][0]["Namespace"] == observability.NAMESPACE
        assert d["service"] == observability.SERVICE


def test_a_step_logs_with_its_record_keys_then_the_invocation_keys_again(logs):
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    def record(mid: str, correlation: str | None) -> SQSRecord:
        attrs = (
            {CORRELATION_ATTRIBUTE: {"stringValue": correlation, "dataType": "String"}} if correlation else {}
        )
        return SQSRecord(
            {
                "messageId": mid,
                "body": "{}",
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": attrs,
            }
        )

    log = logging.getLogger("threads_aws.engine")

    @observability.entry("sqs")
    def handler(event: dict[str, Any], context: Any) -> None:
        with observability.step(record("m-1", "req-9"), "b-1") as got:
            log.info("first")
            got["state"] = "idle"
        with observability.step(record("m-2", None), "b-2") as got:
            log.info("second")
            got["state"] = "parked"
        log.info("after")

    handler({"Records": []}, ctx("run-step"))
    first, second, after = logs()[-3:]
    assert (first["correlation_id"], first["branch_id"], first["message_id"]) == ("req-9", "b-1", "m-1")
    # No correlation attribute (a message from before this change): the message id stands in.
    assert (second["correlation_id"], second["branch_id"]) == ("m-2", "b-2")
    assert "branch_id" not in after and "correlation_id" not in after
    assert after["function_name"] == "run-step"


def test_metrics_outside_an_invocation_are_dropped(capsys):
    observability.count(Metric.STEPS, state="idle")
    observability.flush()
    assert emf(capsys.readouterr().out) == []


def test_a_failing_step_is_logged_with_its_keys_and_counted(logs, capsys):
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    rec = SQSRecord({"messageId": "m-3", "body": "{}", "attributes": {}, "messageAttributes": {}})

    @observability.entry("sqs")
    def handler(event: dict[str, Any], context: Any) -> None:
        with pytest.raises(KeyError), observability.step(rec, "b-3"):
            raise KeyError("boom")

    handler({"Records": []}, ctx("run-step"))
    line = logs()[-1]
    assert line["level"] == "ERROR" and line["branch_id"] == "b-3" and "KeyError" in line["exception"]
    assert metric_values(emf(capsys.readouterr().out), Metric.STEPS, state="error") == [1.0]


def test_a_replayed_start_counts_accepted_but_not_started(env, capsys):
    handler = load_handler("start_run")
    ev = sample("start_run")
    assert handler(ev, ctx("start-run"))["statusCode"] == 202
    docs = emf(capsys.readouterr().out)
    assert metric_values(docs, Metric.RUNS_ACCEPTED) == [1.0]
    assert metric_values(docs, Metric.RUNS_STARTED) == [1.0]
    assert handler(ev, ctx("start-run"))["statusCode"] == 202  # the same key and body: a replay
    docs = emf(capsys.readouterr().out)
    assert metric_values(docs, Metric.RUNS_ACCEPTED) == [1.0]
    assert metric_values(docs, Metric.RUNS_STARTED) == []


def test_a_step_counts_the_turn_end_times_the_model_and_logs_its_thread_and_run(aws, logs, capsys):
    from helpers.engine import make_ctx, new_thread, run, say, scripted
    from threads_aws.engine.models import ScriptedModel

    log = logging.getLogger("threads_aws.engine")
    model = ScriptedModel(hook=lambda _request, _rid: log.info("calling the model"))
    engine = make_ctx(aws, scripted(model))
    branch_id = new_thread(engine)
    run_id = say(engine, branch_id, "hello")
    thread_id = engine.writer.load(branch_id).record.thread_id

    @observability.entry("sqs")
    def handler(event: dict[str, Any], context: Any) -> None:
        assert run(engine, branch_id).state == "idle"

    handler({"Records": []}, ctx("run-step"))
    line = next(x for x in logs() if x["message"] == "calling the model")
    assert (line["thread_id"], line["run_id"]) == (thread_id, run_id)
    docs = emf(capsys.readouterr().out)
    assert metric_values(docs, Metric.RUNS_SETTLED, outcome="end_turn") == [1.0]
    adapter = engine.writer.load(branch_id).fold.settings["adapter"]["name"]
    (ms,) = metric_values(docs, Metric.MODEL_LATENCY, adapter=adapter)
    assert ms >= 0
