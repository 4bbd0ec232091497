"""The persistence layer of `threads-aws dev` (local/persist.py, local/persist_moto.py).

File format: records round-trip across restarts; a torn final record (any cut point) is dropped
and truncated away, not fatal; damage before the end is an error; one server per directory;
compaction switches generations atomically (a crash midway leaves the old one current); large
bodies live in blobs/.

moto: a DurableMoto in this process, reached over HTTP by boto3 like the dev server's handlers;
a "restart" resets moto's backends (a fresh process has none) and replays the directory. Writes
survive with their outcomes (conditional ones included), failed writes and reads are not
journaled, S3 bodies (large ones via blobs/) come back byte-exact, SQS messages keep their ids,
a received-but-undeleted message is visible again and a deleted one stays deleted; three starts
in a row with compaction; a state that no longer fits the template is refused.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from threads_aws_dev.local import persist
from threads_aws_dev.local.persist import PersistError, StateDir, encode_record

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "template.yaml"
REGION = "us-east-1"


def write_journal(path: Path, metas: list[dict[str, Any]], *, fsync: bool = False) -> StateDir:
    """Open the dir, replay nothing, append `metas`, close; returns the closed StateDir."""
    state = StateDir(path, fsync=fsync)
    state.open()
    list(state.records())
    journal = state.start_journal()
    for meta in metas:
        journal.append(meta, b"body-" + str(meta["n"]).encode())
    state.close()
    return state


def read_all(path: Path) -> tuple[list[tuple[dict[str, Any], bytes]], StateDir]:
    state = StateDir(path, fsync=False)
    state.open()
    try:
        return list(state.records()), state
    finally:
        state.close()


# ---------------------------------------------------------------- the file format


def test_records_survive_restarts(tmp_path: Path) -> None:
    write_journal(tmp_path, [{"n": i} for i in range(3)])
    records, _ = read_all(tmp_path)
    assert [(m["n"], b) for m, b in records] == [(i, f"body-{i}".encode()) for i in range(3)]
    # A second and third start append after what is there (one journal per generation).
    state = StateDir(tmp_path, fsync=False)
    state.open()
    assert len(list(state.records())) == 3
    state.start_journal().append({"n": 3}, b"body-3")
    state.close()
    write_journal(tmp_path, [{"n": 4}])
    records, state = read_all(tmp_path)
    assert [m["n"] for m, _ in records] == [0, 1, 2, 3, 4]
    assert state.stats.torn_bytes == 0 and state.stats.journal_records == 6  # + the header


def _cuts() -> list[int]:
    rec = encode_record({"n": 9}, b"x" * 40)
    return [1, 7, 8, 12, len(rec) - 1]


@pytest.mark.parametrize("cut", _cuts())
def test_torn_final_record_is_dropped_not_fatal(tmp_path: Path, cut: int) -> None:
    write_journal(tmp_path, [{"n": 0}, {"n": 1}])
    journal = tmp_path / "journal-0.log"
    good = journal.stat().st_size
    with open(journal, "ab") as fh:  # a crash in the middle of writing record 2
        fh.write(encode_record({"n": 9}, b"x" * 40)[:cut])
    records, state = read_all(tmp_path)
    assert [m["n"] for m, _ in records] == [0, 1]
    assert state.stats.torn_bytes == cut and "torn" in state.stats.warnings[0]
    assert journal.stat().st_size == good  # truncated away: the next append follows record 1
    write_journal(tmp_path, [{"n": 2}])
    assert [m["n"] for m, _ in read_all(tmp_path)[0]] == [0, 1, 2]


def test_final_record_failing_its_checksum_is_torn(tmp_path: Path) -> None:
    write_journal(tmp_path, [{"n": 0}, {"n": 1}])
    journal = tmp_path / "journal-0.log"
    data = bytearray(journal.read_bytes())
    data[-1] ^= 0xFF  # whole length on disk, but the last page never made it
    journal.write_bytes(bytes(data))
    records, state = read_all(tmp_path)
    assert [m["n"] for m, _ in records] == [0]
    assert state.stats.torn_bytes > 0


def test_damage_before_the_end_is_an_error(tmp_path: Path) -> None:
    write_journal(tmp_path, [{"n": 0}, {"n": 1}, {"n": 2}])
    journal = tmp_path / "journal-0.log"
    data = bytearray(journal.read_bytes())
    header_len = len(encode_record(StateDir(tmp_path).header("journal", 0)))
    data[header_len + 12] ^= 0xFF  # inside record 0, with records 1 and 2 after it
    journal.write_bytes(bytes(data))
    with pytest.raises(PersistError, match="checksum"):
        read_all(tmp_path)


def test_newer_format_is_refused(tmp_path: Path) -> None:
    (tmp_path / "journal-0.log").write_bytes(
        encode_record({"format": persist.FORMAT, "version": persist.VERSION + 1})
    )
    with pytest.raises(PersistError, match="newer"):
        read_all(tmp_path)


def test_one_server_per_directory(tmp_path: Path) -> None:
    first = StateDir(tmp_path)
    first.open()
    try:
        with pytest.raises(PersistError, match=f"in use by pid {os.getpid()}"):
            StateDir(tmp_path).open()
    finally:
        first.close()
    StateDir(tmp_path).open()  # released on close (and by the kernel on kill -9)


def test_compaction_switches_generation(tmp_path: Path) -> None:
    write_journal(tmp_path, [{"n": i} for i in range(5)])
    state = StateDir(tmp_path, fsync=False)
    state.open()
    old = list(state.records())
    big = os.urandom(persist.BLOB_MIN + 1)
    orphan = state.put_blob(b"y" * (persist.BLOB_MIN + 1))  # named by no record
    assert state.compact([({"n": "s1"}, b""), ({"n": "s2"}, big)]) == 2
    state.start_journal().append({"n": "after"}, b"")
    state.close()
    assert len(old) == 5
    assert sorted(p.name for p in tmp_path.glob("*.log")) == ["journal-1.log", "snapshot-1.log"]
    assert not state.blob_path(orphan).exists()
    records, reopened = read_all(tmp_path)
    assert [m["n"] for m, _ in records] == ["s1", "s2", "after"]
    assert records[1][1] == big and reopened.generation == 1


def test_a_crash_during_compaction_keeps_the_old_generation(tmp_path: Path) -> None:
    write_journal(tmp_path, [{"n": 0}, {"n": 1}])
    (tmp_path / "snapshot-1.log.tmp").write_bytes(b"half a snapshot")  # never renamed
    records, state = read_all(tmp_path)
    assert [m["n"] for m, _ in records] == [0, 1] and state.generation == 0
    assert not (tmp_path / "snapshot-1.log.tmp").exists()
    # Renamed but the old journal not yet deleted: the snapshot is current, the old journal goes.
    state = StateDir(tmp_path, fsync=False)
    state.open()
    list(state.records())
    state.compact([({"n": "s"}, b"")])
    state.close()
    (tmp_path / "journal-0.log").write_bytes(b"stale")
    records, state = read_all(tmp_path)
    assert [m["n"] for m, _ in records] == ["s"] and not (tmp_path / "journal-0.log").exists()


def test_large_bodies_live_in_blobs(tmp_path: Path) -> None:
    state = StateDir(tmp_path, fsync=False)
    state.open()
    list(state.records())
    journal = state.start_journal()
    small, big = b"s" * persist.BLOB_MIN, os.urandom(persist.BLOB_MIN + 1)
    for body in (small, big):
        meta, stored = state.split_body({"n": len(body)}, body)
        journal.append(meta, stored)
    state.close()
    sha = hashlib.sha256(big).hexdigest()
    assert state.blob_path(sha).read_bytes() == big
    assert (tmp_path / "journal-0.log").stat().st_size < persist.BLOB_MIN + 400  # big not inline
    assert [b for _, b in read_all(tmp_path)[0]] == [small, big]
    state.blob_path(sha).unlink()
    with pytest.raises(PersistError, match="missing"):
        read_all(tmp_path)


# ---------------------------------------------------------------- moto, journaled and replayed


@dataclass
class Booted:
    moto: Any
    ddb: Any
    s3: Any
    sqs: Any
    resources: Any
    report: Any

    def journal_size(self) -> int:
        return self.moto.state.journal.written  # type: ignore[no-any-return]


@pytest.fixture
def boot(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    boto3 = pytest.importorskip("boto3")
    pytest.importorskip("moto.server")
    import logging

    from moto.moto_api._internal.models import moto_api_backend
    from threads_aws_dev.local.infra import create_resources
    from threads_aws_dev.local.moto_patch import serialize_dynamodb, speed_up_moto_transactions
    from threads_aws_dev.local.persist_effects import install_sqs_hooks
    from threads_aws_dev.local.persist_moto import DurableMoto

    monkeypatch.setattr(logging.getLogger("werkzeug"), "level", logging.ERROR)  # per-request lines
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(var, raising=False)
    speed_up_moto_transactions(monkeypatch)
    serialize_dynamodb(monkeypatch)
    install_sqs_hooks(monkeypatch.setattr)
    running: list[Any] = []

    def start(state_dir: Path, *, prefix: str = "p", compact_min_bytes: int = 1 << 30) -> Booted:
        for m in running:
            m.stop()
        running.clear()
        moto_api_backend.reset()  # what a new process starts from
        moto = DurableMoto(state_dir, fsync=False, compact_min_bytes=compact_min_bytes)
        moto.start()
        running.append(moto)
        host, port = moto.get_host_and_port()
        session = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        )
        clients = {
            s: session.client(s, endpoint_url=f"http://{host}:{port}") for s in ("dynamodb", "s3", "sqs")
        }
        resources = create_resources(TEMPLATE, clients, prefix=prefix)
        names = {v.rstrip("/").rsplit("/", 1)[-1] for v in resources.physical.values()}
        report = moto.restore(names)
        return Booted(moto, clients["dynamodb"], clients["s3"], clients["sqs"], resources, report)

    yield start
    for m in running:
        m.stop()
    moto_api_backend.reset()


def _put(b: Booted, pk: str, **attrs: Any) -> None:
    item = {"pk": {"S": pk}, "sk": {"S": "x"}, **{k: {"S": v} for k, v in attrs.items()}}
    b.ddb.put_item(TableName=b.resources.state_table, Item=item)


def _get(b: Booted, pk: str) -> dict[str, Any] | None:
    got = b.ddb.get_item(TableName=b.resources.state_table, Key={"pk": {"S": pk}, "sk": {"S": "x"}})
    return got.get("Item")


def _no_retries(client: Any) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
        client.meta.service_model.service_name,
        endpoint_url=client.meta.endpoint_url,
        region_name=client.meta.region_name,
        config=Config(retries={"mode": "standard", "max_attempts": 1}),
    )


def _state_keys(b: Booted) -> tuple[str, str]:
    desc = b.ddb.describe_table(TableName=b.resources.state_table)["Table"]["KeySchema"]
    return tuple(k["AttributeName"] for k in desc)  # type: ignore[return-value]


def test_moto_state_survives_a_restart(boot: Any, tmp_path: Path) -> None:
    from botocore.exceptions import ClientError

    b = boot(tmp_path)
    assert _state_keys(b) == ("pk", "sk")
    _put(b, "a", v="1")
    before = b.journal_size()
    with pytest.raises(ClientError, match="ConditionalCheckFailed"):
        b.ddb.put_item(
            TableName=b.resources.state_table,
            Item={"pk": {"S": "a"}, "sk": {"S": "x"}, "v": {"S": "lost"}},
            ConditionExpression="attribute_not_exists(pk)",
        )
    assert b.journal_size() == before  # a failed write changed nothing: not journaled
    for _ in range(2):  # order-dependent: each replays on the state the previous one left
        b.ddb.update_item(
            TableName=b.resources.state_table,
            Key={"pk": {"S": "n"}, "sk": {"S": "x"}},
            UpdateExpression="ADD c :one",
            ConditionExpression="attribute_not_exists(c) OR c < :two",
            ExpressionAttributeValues={":one": {"N": "1"}, ":two": {"N": "2"}},
        )
    b.ddb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": b.resources.state_table, "Item": {"pk": {"S": "t1"}, "sk": {"S": "x"}}}},
            {"Delete": {"TableName": b.resources.state_table, "Key": {"pk": {"S": "a"}, "sk": {"S": "x"}}}},
        ]
    )
    small, big = b"small artifact", os.urandom(persist.BLOB_MIN * 3)
    for body in (small, big):
        key = "sha256/" + hashlib.sha256(body).hexdigest()
        b.s3.put_object(
            Bucket=b.resources.bucket, Key=key, Body=body, ContentType="application/x-test", IfNoneMatch="*"
        )
    with pytest.raises(ClientError, match="PreconditionFailed"):
        b.s3.put_object(
            Bucket=b.resources.bucket,
            Key="sha256/" + hashlib.sha256(small).hexdigest(),
            Body=b"other",
            IfNoneMatch="*",
        )
    q = b.resources.run_step_queue_url
    sent = [
        b.sqs.send_message(
            QueueUrl=q, MessageBody=f"m{i}", MessageGroupId=f"g{i}", MessageDeduplicationId=f"d{i}"
        )["MessageId"]
        for i in range(3)
    ]
    got = b.sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10)["Messages"]
    assert len(got) == 3
    done = next(m for m in got if m["Body"] == "m0")
    b.sqs.delete_message(QueueUrl=q, ReceiptHandle=done["ReceiptHandle"])
    # m1, m2: received, not deleted (in flight for the queue's 1,800 s visibility timeout)
    reads = b.journal_size()
    _get(b, "n")
    b.ddb.scan(TableName=b.resources.state_table)
    b.s3.get_object(Bucket=b.resources.bucket, Key="sha256/" + hashlib.sha256(big).hexdigest())
    assert b.sqs.receive_message(QueueUrl=q).get("Messages") is None
    assert b.journal_size() == reads  # reads (and receives) are not journaled

    b = boot(tmp_path)  # a new process on the same directory
    assert b.report.records > 0 and b.report.compacted is None
    assert _get(b, "a") is None and _get(b, "t1") is not None
    assert _get(b, "n")["c"] == {"N": "2"}  # type: ignore[index]
    for body in (small, big):
        obj = b.s3.get_object(Bucket=b.resources.bucket, Key="sha256/" + hashlib.sha256(body).hexdigest())
        assert obj["Body"].read() == body and obj["ContentType"] == "application/x-test"
    assert any((tmp_path / "blobs").glob("*/*"))  # the large body went beside the journal
    assert (tmp_path / "journal-0.log").stat().st_size < len(big)
    again = b.sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert sorted((m["MessageId"], m["Body"]) for m in again) == sorted(
        zip(sent[1:], ["m1", "m2"], strict=True)
    )
    assert {m["Attributes"]["MessageGroupId"] for m in again} == {"g1", "g2"}
    # The FIFO dedup window is kept: the same dedup id within 5 minutes is still a duplicate.
    b.sqs.send_message(QueueUrl=q, MessageBody="dup", MessageGroupId="g1", MessageDeduplicationId="d1")
    for m in again:
        b.sqs.delete_message(QueueUrl=q, ReceiptHandle=m["ReceiptHandle"])
    assert b.sqs.receive_message(QueueUrl=q).get("Messages") is None


def test_three_starts_with_compaction(boot: Any, tmp_path: Path) -> None:
    b = boot(tmp_path, compact_min_bytes=0)
    _put(b, "one", v="1")
    b.s3.put_object(Bucket=b.resources.bucket, Key="k/1", Body=os.urandom(persist.BLOB_MIN * 2))
    b.sqs.send_message(
        QueueUrl=b.resources.run_step_queue_url,
        MessageBody="s1",
        MessageGroupId="g",
        MessageDeduplicationId="1",
    )

    b = boot(tmp_path, compact_min_bytes=0)  # replays the journal, then compacts it
    assert b.report.compacted is not None and b.report.generation == 1
    assert sorted(p.name for p in tmp_path.glob("*.log")) == ["journal-1.log", "snapshot-1.log"]
    _put(b, "two", v="2")
    body1 = b.s3.get_object(Bucket=b.resources.bucket, Key="k/1")["Body"].read()

    b = boot(tmp_path, compact_min_bytes=0)  # snapshot + a journal smaller than it: kept as is
    assert b.report.generation == 1 and b.report.compacted is None
    assert _get(b, "one")["v"] == {"S": "1"} and _get(b, "two")["v"] == {"S": "2"}  # type: ignore[index]
    assert b.s3.get_object(Bucket=b.resources.bucket, Key="k/1")["Body"].read() == body1
    msgs = b.sqs.receive_message(QueueUrl=b.resources.run_step_queue_url)["Messages"]
    assert [m["Body"] for m in msgs] == ["s1"]


def test_state_that_no_longer_fits_the_template_is_refused(boot: Any, tmp_path: Path) -> None:
    b = boot(tmp_path, prefix="old")
    _put(b, "a", v="1")
    with pytest.raises(PersistError, match="does not replay.*--ephemeral"):
        boot(tmp_path, prefix="new")  # other table names: the records name tables that are gone


def _dump(b: Booted) -> dict[str, Any]:
    """Everything a client can read back: both tables, the GSI, the bucket, the queues."""
    out: dict[str, Any] = {}
    for table in (b.resources.state_table, b.resources.events_table):
        items = b.ddb.get_paginator("scan").paginate(TableName=table).build_full_result()["Items"]
        out[table] = sorted(items, key=repr)
    gsi = b.ddb.query(
        TableName=b.resources.state_table,
        IndexName="gsi1",
        KeyConditionExpression="gsi1pk = :t",
        ExpressionAttributeValues={":t": {"S": "tenant#t"}},
    )
    out["gsi1"] = sorted(gsi["Items"], key=repr)
    for obj in b.s3.list_objects_v2(Bucket=b.resources.bucket).get("Contents", []):
        got = b.s3.get_object(Bucket=b.resources.bucket, Key=obj["Key"])
        out["s3:" + obj["Key"]] = (got["Body"].read(), got["ContentType"], got.get("Metadata"))
    return out


def test_everything_readable_comes_back_equal(boot: Any, tmp_path: Path) -> None:
    b = boot(tmp_path)
    state, events = b.resources.state_table, b.resources.events_table
    nested = {"M": {"blob": {"B": b"\x00\xffbinary"}, "list": {"L": [{"B": b"x"}, {"N": "1.50"}]}}}
    for part in (range(0, 15), range(15, 30)):  # BatchWriteItem takes at most 25 requests
        b.ddb.batch_write_item(
            RequestItems={
                state: [
                    {
                        "PutRequest": {
                            "Item": {
                                "pk": {"S": f"b{i}"},
                                "sk": {"S": "x"},
                                "gsi1pk": {"S": "tenant#t"},
                                "gsi1sk": {"S": f"{i:03}"},
                                "bin": {"B": bytes([i])},
                                "doc": nested,
                            }
                        }
                    }  # fmt: skip
                    for i in part
                ]
            }
        )
    b.ddb.batch_write_item(
        RequestItems={state: [{"DeleteRequest": {"Key": {"pk": {"S": "b3"}, "sk": {"S": "x"}}}}]}
    )
    b.ddb.delete_item(TableName=state, Key={"pk": {"S": "never"}, "sk": {"S": "x"}})  # 2xx, changes nothing
    b.ddb.update_item(
        TableName=state,
        Key={"pk": {"S": "b4"}, "sk": {"S": "x"}},
        UpdateExpression="SET doc.#l = list_append(doc.#l, :more) REMOVE gsi1pk",
        ExpressionAttributeNames={"#l": "list"},
        ExpressionAttributeValues={":more": {"L": [{"SS": ["a", "b"]}]}},
    )
    b.ddb.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": events, "Item": {"branch_id": {"S": "br"}, "seq": {"N": str(n)}}}}
            for n in range(5)
        ]
    )
    b.s3.put_object(
        Bucket=b.resources.bucket, Key="meta/1", Body=b"m", ContentType="text/plain", Metadata={"k": "v"}
    )
    b.s3.put_object(Bucket=b.resources.bucket, Key="gone", Body=b"g")
    b.s3.delete_object(Bucket=b.resources.bucket, Key="gone")
    q = b.resources.inbox_queue_url
    b.sqs.send_message(
        QueueUrl=q,
        MessageBody="with attributes",
        MessageGroupId="g",
        MessageDeduplicationId="a1",
        MessageAttributes={
            "bin": {"DataType": "Binary", "BinaryValue": b"\x01\x02"},
            "s": {"DataType": "String", "StringValue": "v"},
        },
    )
    b.sqs.send_message(
        QueueUrl=b.resources.run_step_queue_url,
        MessageBody="purged",
        MessageGroupId="g",
        MessageDeduplicationId="p",
    )
    b.sqs.purge_queue(QueueUrl=b.resources.run_step_queue_url)
    before = _dump(b)
    assert len(before[state]) == 29 and len(before["gsi1"]) == 28 and "s3:gone" not in before

    for compact in (False, True):  # replayed from the journal, then from a snapshot
        b = boot(tmp_path, compact_min_bytes=0 if compact else 1 << 30)
        assert (b.report.compacted is not None) == compact
        assert _dump(b) == before
    got = b.sqs.receive_message(QueueUrl=q, MessageAttributeNames=["All"])["Messages"]
    assert [m["Body"] for m in got] == ["with attributes"]
    assert got[0]["MessageAttributes"]["bin"]["BinaryValue"] == b"\x01\x02"
    assert b.sqs.receive_message(QueueUrl=b.resources.run_step_queue_url).get("Messages") is None


def test_a_journal_that_cannot_be_written_stops_the_server(boot: Any, tmp_path: Path) -> None:
    from botocore.exceptions import ClientError

    b = boot(tmp_path)
    _put(b, "kept", v="1")
    journal = b.moto.state.journal
    readonly = os.open(journal.path, os.O_RDONLY)
    os.dup2(readonly, journal._fd)  # the journal can no longer be written (EBADF)
    os.close(readonly)
    # The refusal is a 500, which botocore retries (DynamoDB: 10 attempts, ~25 s of backoff per
    # call): a client that asks once sees the same answer.
    once = replace(b, ddb=_no_retries(b.ddb))
    with pytest.raises(ClientError, match="journal failed"):
        _put(once, "lost", v="2")  # applied in memory, never acknowledged
    with pytest.raises(ClientError, match="journal failed"):
        _get(once, "kept")  # and nothing more is served from a state the disk does not have
    b = boot(tmp_path)
    assert _get(b, "kept") is not None and _get(b, "lost") is None
