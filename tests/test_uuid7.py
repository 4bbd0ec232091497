"""core.canonical.new_uuid7: RFC 9562 v7 ids (uuid6), time-ordered within a process, imported lazily."""

from __future__ import annotations

import threading
import time
import uuid

from threads_aws.core.canonical import new_uuid7


def test_ids_are_version_7_with_the_current_millisecond():
    before = time.time_ns() // 1_000_000
    u = uuid.UUID(new_uuid7())
    assert u.version == 7 and u.variant == uuid.RFC_4122
    assert before <= u.int >> 80 <= time.time_ns() // 1_000_000 + 1_000


def test_ids_sort_in_creation_order_and_never_repeat_even_across_threads():
    ids: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        out.extend(new_uuid7() for _ in range(2_000))

    threads = [threading.Thread(target=make, args=(out,)) for out in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for out in ids:
        assert out == sorted(out)
    every = [i for out in ids for i in out]
    assert len(set(every)) == len(every)
    # The random bits vary (74 of them): two ids of one millisecond differ below the timestamp.
    assert len({i[15:] for i in every}) == len(every)


def test_uuid6_is_not_imported_until_an_id_is_minted():
    import subprocess
    import sys

    code = (
        "import sys; import threads_aws.core.canonical as c; a = 'uuid6' in sys.modules; "
        "c.new_uuid7(); print(a, 'uuid6' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
