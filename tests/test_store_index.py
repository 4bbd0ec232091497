"""ThreadIndex on moto: threads, branches, tenant isolation."""

from __future__ import annotations

import pytest
from threads_aws.store import AlreadyExists, NewBranch, NotFound


def make_thread(aws, chain, tenant):
    store = aws.events()
    c = chain()
    store.create_branch(
        NewBranch(
            thread_id=c.thread_id, tenant=tenant, branch_id=c.branch_id, header=c.header, create_thread=True
        )
    )
    store.append(c.branch_id, c.events(3), expected_head_seq=0, epoch=1)
    return store, c


def test_create_branch_registers_thread_and_branch(aws, chain):
    store, c = make_thread(aws, chain, "acme")
    idx = aws.index()
    t = idx.get_thread("acme", c.thread_id)
    assert t is not None and (t.tenant, t.main_branch_id, t.created_at) == (
        "acme",
        c.branch_id,
        1_700_000_000_000,
    )
    branches = idx.list_branches("acme", c.thread_id)
    assert [b.branch_id for b in branches] == [c.branch_id]
    assert branches[0].head_seq == 3 and branches[0].parent_branch_id is None
    assert idx.branch_of("acme", c.thread_id, c.branch_id).head_hash == c.lines[-1].hash


def test_tenant_isolation(aws, chain):
    _, mine = make_thread(aws, chain, "acme")
    _, theirs = make_thread(aws, chain, "globex")
    idx = aws.index()
    assert idx.get_thread("globex", mine.thread_id) is None
    assert idx.list_branches("globex", mine.thread_id) == []
    assert idx.branch_of("globex", mine.thread_id, mine.branch_id) is None
    assert idx.branch_of("acme", theirs.thread_id, theirs.branch_id) is None
    # a branch must belong to the thread named
    assert idx.branch_of("acme", theirs.thread_id, mine.branch_id) is None
    assert idx.branch_of("acme", mine.thread_id, theirs.branch_id) is None
    # nobody can add a branch to another tenant's thread
    intruder = chain(mine.thread_id)
    with pytest.raises(NotFound):
        aws.events().create_branch(
            NewBranch(
                thread_id=mine.thread_id,
                tenant="globex",
                branch_id=intruder.branch_id,
                header=intruder.header,
            )
        )
    threads, cursor = idx.list_threads("acme")
    assert [t.thread_id for t in threads] == [mine.thread_id] and cursor is None
    assert [t.thread_id for t in idx.list_threads("globex")[0]] == [theirs.thread_id]


def test_list_branches_excludes_forking(aws, chain):
    store, root = make_thread(aws, chain, "acme")
    child = root.fork(2)
    store.create_branch(
        NewBranch(
            thread_id=root.thread_id,
            tenant="acme",
            branch_id=child.branch_id,
            header=child.header,
            parent_branch_id=root.branch_id,
            fork_at_seq=2,
            state="forking",
        )
    )
    idx = aws.index()
    assert [b.branch_id for b in idx.list_branches("acme", root.thread_id)] == [root.branch_id]
    assert idx.branch_of("acme", root.thread_id, child.branch_id).state == "forking"
    store.append(child.branch_id, child.lines, expected_head_seq=2, epoch=1)
    store.set_state(child.branch_id, "ready", expected_state="forking")
    got = idx.list_branches("acme", root.thread_id)
    assert {b.branch_id for b in got} == {root.branch_id, child.branch_id}
    kid = next(b for b in got if b.branch_id == child.branch_id)
    assert (kid.parent_branch_id, kid.fork_at_seq, kid.head_seq) == (root.branch_id, 2, 3)


def test_create_thread_standalone_then_branch(aws, chain):
    idx = aws.index()
    c = chain()
    idx.create_thread("acme", c.thread_id, c.branch_id, 5)
    with pytest.raises(AlreadyExists):
        idx.create_thread("acme", c.thread_id, c.branch_id, 5)
    aws.events().create_branch(
        NewBranch(thread_id=c.thread_id, tenant="acme", branch_id=c.branch_id, header=c.header)
    )
    assert [b.branch_id for b in idx.list_branches("acme", c.thread_id)] == [c.branch_id]
    # the same thread id can't be created again through create_branch either
    with pytest.raises(AlreadyExists):
        d = chain(c.thread_id)
        aws.events().create_branch(
            NewBranch(
                thread_id=c.thread_id,
                tenant="acme",
                branch_id=d.branch_id,
                header=d.header,
                create_thread=True,
            )
        )
