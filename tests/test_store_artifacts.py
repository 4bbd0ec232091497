"""ArtifactStore on moto: content addressing, conditional writes, verification on read."""

from __future__ import annotations

import hashlib

import pytest
from botocore.exceptions import ClientError
from threads_aws.core.errors import LogError
from threads_aws.store.artifacts import ArtifactStore


def test_put_get_round_trip(aws):
    store = aws.artifacts()
    data = b"hello \x00 world" * 1000
    ref = store.put(data, "application/octet-stream")
    sha = hashlib.sha256(data).hexdigest()
    assert ref == {"bytes": len(data), "media_type": "application/octet-stream", "sha256": sha}
    assert store.exists(sha)
    assert store.get(sha, len(data)) == data
    assert store.get_ref(ref) == data
    head = aws.s3.head_object(Bucket=aws.resources.bucket, Key=f"sha256/{sha}")
    assert head["ContentType"] == "application/octet-stream"


def test_put_twice_is_fine_and_keeps_the_first_object(aws):
    store = aws.artifacts()
    ref1 = store.put(b"same bytes", "text/plain")
    ref2 = store.put(b"same bytes", "text/plain")
    assert ref1 == ref2
    assert store.conditional_writes is True  # moto answers IfNoneMatch with 412, no fallback


def test_conditional_write_is_really_sent(aws):
    """The second put must hit S3's If-None-Match precondition (412), not overwrite."""
    store = aws.artifacts()
    store.put(b"x", "text/plain")
    with pytest.raises(ClientError) as err:
        aws.s3.put_object(
            Bucket=aws.resources.bucket,
            Key=ArtifactStore.key(hashlib.sha256(b"x").hexdigest()),
            Body=b"y",
            IfNoneMatch="*",
        )
    assert err.value.response["Error"]["Code"] == "PreconditionFailed"


def test_missing_is_artifact_missing(aws):
    store = aws.artifacts()
    sha = hashlib.sha256(b"never stored").hexdigest()
    assert not store.exists(sha)
    with pytest.raises(LogError) as err:
        store.get(sha, 12)
    assert err.value.code == "artifact_missing"


def test_corrupted_object_is_artifact_corrupt(aws):
    store = aws.artifacts()
    data = b"the original artifact"
    ref = store.put(data, "text/plain")
    key = f"sha256/{ref['sha256']}"
    aws.s3.put_object(Bucket=aws.resources.bucket, Key=key, Body=b"the originel artifact")  # same length
    with pytest.raises(LogError) as err:
        store.get(ref["sha256"], ref["bytes"])
    assert err.value.code == "artifact_corrupt"
    aws.s3.put_object(Bucket=aws.resources.bucket, Key=key, Body=data + b"!")  # wrong length
    with pytest.raises(LogError) as err:
        store.get_ref(ref)
    assert err.value.code == "artifact_corrupt"


def test_bad_digest_is_refused(aws):
    store = aws.artifacts()
    for bad in ("ABC", "../etc/passwd", "A" * 64):
        with pytest.raises(ValueError):
            store.get(bad)


def test_fallback_when_conditional_writes_are_not_implemented(aws):
    """An S3-compatible service without If-None-Match (501) gets HeadObject + PutObject."""

    class NoConditional:
        def __init__(self, real):
            self.real = real
            self.calls = []

        def put_object(self, **kw):
            self.calls.append("put" + ("-if" if "IfNoneMatch" in kw else ""))
            if "IfNoneMatch" in kw:
                raise ClientError(
                    {
                        "Error": {"Code": "NotImplemented", "Message": "no"},
                        "ResponseMetadata": {"HTTPStatusCode": 501},
                    },
                    "PutObject",
                )
            return self.real.put_object(**kw)

        def __getattr__(self, name):
            return getattr(self.real, name)

    s3 = NoConditional(aws.s3)
    store = ArtifactStore(s3, aws.resources.bucket)
    ref = store.put(b"abc", "text/plain")
    assert store.conditional_writes is False
    store.put(b"abc", "text/plain")  # exists: no second write
    assert s3.calls == ["put-if", "put"]
    assert store.get_ref(ref) == b"abc"
