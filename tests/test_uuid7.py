"""core.canonical.new_uuid7: RFC 9562 v7 ids (uuid6), time-ordered within a process, imported lazily."""

from __future__ import annotations

import threading
import time
import uuid

from threads_aws.core.canonical import new_uuid7


def test_ids_are_version_7_with_the_current_millisecond():
    # In a fresh process: uuid6 keeps ids strictly increasing by bumping its last millisecond, so
    # after a burst in this process (the test below mints 8,000) ids run seconds ahead of the clock.
    import subprocess
    import sys

    code = (
        "import time, uuid; from threads_aws.core.canonical import new_uuid7; "
        "b = time.time_ns() // 1_000_000; u = uuid.UUID(new_uuid7()); "
        "a = time.time_ns() // 1_000_000; "
        "print(u.version == 7, u.variant == uuid.RFC_4122, b <= u.int >> 80 <= a)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True", "True"]


def test_ids_stay_increasing_after_a_burst_and_the_drift_is_bounded_by_the_count():
    before = time.time_ns() // 1_000_000
    burst = [new_uuid7() for _ in range(500)]
    after = time.time_ns() // 1_000_000
    stamps = [uuid.UUID(i).int >> 80 for i in burst]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    # Each id takes at most one millisecond past the clock or the previous id.
    assert stamps[-1] <= max(after, stamps[0]) + len(burst)
    assert stamps[0] >= before


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
