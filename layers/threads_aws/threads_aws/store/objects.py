"""Configuration objects read from S3 (the deployment's agents file named by `AGENTS_S3_URI`).

Read once per container by the caller (no writes): `s3://bucket/key` → the object's bytes.
A missing object or a denied read raises: a deployment whose configured agents can't be read
must fail at start, not run with other agents.
"""

from __future__ import annotations

from typing import Any


def parse_s3_uri(uri: str) -> tuple[str, str]:
    if not uri.startswith("s3://") or "/" not in uri[5:]:
        raise ValueError(f"not an s3://bucket/key URI: {uri!r}")
    bucket, _, key = uri[5:].partition("/")
    if not bucket or not key:
        raise ValueError(f"not an s3://bucket/key URI: {uri!r}")
    return bucket, key


def read_object(s3: Any, uri: str) -> bytes:
    bucket, key = parse_s3_uri(uri)
    body: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    return body
