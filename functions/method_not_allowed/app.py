"""Any method the contract does not declare on a /v1 path (the path's ANY route): 405 with the
path's methods in `Allow`."""

from __future__ import annotations

from typing import Any

from threads_aws.host.runtime import method_not_allowed
from threads_aws.observability import entry


@entry("api")
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return method_not_allowed(event)
