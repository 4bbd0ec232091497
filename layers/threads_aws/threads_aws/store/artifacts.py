"""Content-addressed artifacts in S3: key ``sha256/<hex>``, immutable once written.

``put`` writes with ``IfNoneMatch="*"`` (S3 conditional writes): a 412 PreconditionFailed (or a
409 ConditionalRequestConflict from a concurrent writer of the same key) means the object is
already stored, which for content-addressed keys is success. The upload also carries
``ChecksumSHA256`` so S3 refuses a body damaged in transit. A service that doesn't implement
conditional writes (501 NotImplemented, e.g. an older S3-compatible store) falls back to
HeadObject + unconditional PutObject. ``get`` re-verifies length and sha256 on every read.
"""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from botocore.exceptions import ClientError

from ..core.errors import LogError

KEY_PREFIX = "sha256/"
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_MISSING_CODES = {"NoSuchKey", "404", "NotFound"}
_ALREADY_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}


def _check_sha(sha256: str) -> None:
    if not isinstance(sha256, str) or not _HEX64.match(sha256):
        raise ValueError(f"not a lowercase sha256 hex digest: {sha256!r}")


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


class ArtifactStore:
    def __init__(self, s3_client: Any, bucket: str) -> None:
        self.s3 = s3_client
        self.bucket = bucket
        self.conditional_writes = True  # flips off once the service answers 501 to IfNoneMatch

    @staticmethod
    def key(sha256: str) -> str:
        _check_sha(sha256)
        return KEY_PREFIX + sha256

    def put(self, data: bytes, media_type: str) -> dict[str, Any]:
        """Store `data` and return its ArtifactRef ``{bytes, media_type, sha256}``."""
        digest = hashlib.sha256(data).digest()
        sha = digest.hex()
        ref = {"bytes": len(data), "media_type": media_type, "sha256": sha}
        kwargs: dict[str, Any] = {
            "Bucket": self.bucket,
            "Key": KEY_PREFIX + sha,
            "Body": data,
            "ContentType": media_type,
            "ChecksumSHA256": base64.b64encode(digest).decode("ascii"),
        }
        if self.conditional_writes:
            try:
                self.s3.put_object(IfNoneMatch="*", **kwargs)
                return ref
            except ClientError as exc:
                if _code(exc) in _ALREADY_CODES or _status(exc) in (409, 412):
                    return ref
                if _code(exc) != "NotImplemented" and _status(exc) != 501:
                    raise
                self.conditional_writes = False
        if not self.exists(sha):
            self.s3.put_object(**kwargs)
        return ref

    def seed(self, name: str, data: bytes) -> None:
        """Store `data` under the key of `name` as given, unverified: fixtures (conformance cases)
        that ship artifacts, some deliberately corrupt, so reads must catch them."""
        self.s3.put_object(Bucket=self.bucket, Key=self.key(name), Body=data)

    def get(self, sha256: str, length: int | None = None) -> bytes:
        """The artifact's bytes, verified: absent → artifact_missing, altered → artifact_corrupt."""
        key = self.key(sha256)
        try:
            obj = self.s3.get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if _code(exc) in _MISSING_CODES or _status(exc) == 404:
                raise LogError("artifact_missing", None, f"no artifact {sha256}") from exc
            raise
        data = obj["Body"].read()
        if length is not None and len(data) != length:
            raise LogError(
                "artifact_corrupt", None, f"artifact {sha256}: {len(data)} bytes, expected {length}"
            )
        if hashlib.sha256(data).hexdigest() != sha256:
            raise LogError("artifact_corrupt", None, f"artifact {sha256}: content hash differs")
        return data

    def get_ref(self, ref: dict[str, Any]) -> bytes:
        return self.get(ref["sha256"], ref.get("bytes"))

    def exists(self, sha256: str) -> bool:
        try:
            self.s3.head_object(Bucket=self.bucket, Key=self.key(sha256))
            return True
        except ClientError as exc:
            if _code(exc) in _MISSING_CODES or _status(exc) == 404:
                return False
            raise

    def size(self, sha256: str) -> int | None:
        """The stored object's length (one HeadObject), None when it is absent."""
        try:
            head = self.s3.head_object(Bucket=self.bucket, Key=self.key(sha256))
        except ClientError as exc:
            if _code(exc) in _MISSING_CODES or _status(exc) == 404:
                return None
            raise
        return int(head["ContentLength"])
