"""Deferred calls (`DeferredCallQueue`, a standard SQS queue): "run call C of branch B off the
turn", and the key that signs each such message.

A message is `{tenant, thread_id, branch_id, call_id, token}`; `token` is
HMAC-SHA256(key, "tenant\\nthread_id\\nbranch_id\\ncall_id") in hex, minted per call by the
worker that dispatched it, so the runner (`engine.deferred_runner`) acts only on a call a worker
of this deployment sent off, never on a message naming another tenant's or another call's
coordinates. The key is one state-table row (pk ``KEY#deferred_calls``, sk ``v1``, `key` B: 32
random bytes), created once by the first container that needs it (a conditional put; a lost
race reads the winner's), then cached per container: one GetItem per container.

Ordering: the worker sends the message before it appends the call's placeholder
(`tool_result{origin: deferred}`): a crash between leaves a spare message (the runner finds no
placeholder and retries until the re-decided call's own placeholder lands, or the call closed
otherwise), never a placeholder that nothing runs.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
from typing import Any

from botocore.exceptions import ClientError

from .. import observability
from .dynamo import condition_failed

KEY_ITEM = {"pk": {"S": "KEY#deferred_calls"}, "sk": {"S": "v1"}}
FIELDS = ("tenant", "thread_id", "branch_id", "call_id")
#: The worker appends the placeholder right after sending: a second's delay lets the runner
#: find it on the first receive (else it comes back after a short backoff: `retry_later`).
SEND_DELAY_S = 1


class SigningKey:
    def __init__(self, ddb: Any, table: str) -> None:
        self.ddb = ddb
        self.table = table
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def get(self) -> bytes:
        with self._lock:
            if self._key is None:
                self._key = self._load()
            return self._key

    def _load(self) -> bytes:
        out = self.ddb.get_item(TableName=self.table, Key=KEY_ITEM, ConsistentRead=True)
        if "Item" in out:
            return bytes(out["Item"]["key"]["B"])
        key = os.urandom(32)
        try:
            self.ddb.put_item(
                TableName=self.table,
                Item={**KEY_ITEM, "kind": {"S": "signing_key"}, "key": {"B": key}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            out = self.ddb.get_item(TableName=self.table, Key=KEY_ITEM, ConsistentRead=True)
            return bytes(out["Item"]["key"]["B"])
        return key


def token(key: bytes, coords: dict[str, str]) -> str:
    msg = "\n".join(coords[k] for k in FIELDS).encode()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def verified(key: bytes, message: dict[str, Any]) -> bool:
    if not all(isinstance(message.get(k), str) and message[k] for k in FIELDS):
        return False
    given = message.get("token")
    return isinstance(given, str) and hmac.compare_digest(token(key, message), given)


class DeferredCalls:
    """Sends a deferred call to the runner: the queue and the signing key."""

    def __init__(self, sqs: Any, queue_url: str, key: SigningKey) -> None:
        self.sqs = sqs
        self.url = queue_url
        self.key = key

    def send(self, coords: dict[str, str]) -> None:
        body = {**{k: coords[k] for k in FIELDS}, "token": token(self.key.get(), coords)}
        self.sqs.send_message(
            QueueUrl=self.url,
            DelaySeconds=SEND_DELAY_S,
            MessageBody=json.dumps(body, sort_keys=True),
            **observability.message_attributes(),
        )

    def retry_later(self, receipt_handle: str, seconds: int) -> None:
        """A received message back after `seconds`, not the queue's long visibility timeout
        (its placeholder was not appended yet, or the tool gave no answer)."""
        self.sqs.change_message_visibility(
            QueueUrl=self.url, ReceiptHandle=receipt_handle, VisibilityTimeout=seconds
        )

    def verify(self, message: dict[str, Any]) -> bool:
        return verified(self.key.get(), message)
