"""The cycle over a queue tree: weights share within each level, a parent's cap bounds its
children together, a queue with no place in the tree makes its gangs wait saying why."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.model.objects import Gang, QueueName, QueueSpec
from gangsched.core.model.resources import Capability
from gangsched.core.queues.hierarchy import build_tree
from gangsched.core.reasons import (
    AdmissionOverCapability,
    CapabilityExceeded,
    QueueClosed,
    QueueInvalid,
    QueueNotLeaf,
)
from tests.unit.test_cycle import cpu, cycle, gang, node, placed, pod, reasons


def spec(name: str, parent: str | None = None, weight: int = 1, cores: int | None = None,
         *, open_: bool = True) -> QueueSpec:
    return QueueSpec(QueueName(name), weight=weight, open=open_,
                     parent=QueueName(parent) if parent else None,
                     capability=Capability.parse({"cpu": cores}) if cores is not None else None)


def flood(queue: str, count: int, created: float = 0.0) -> list[Gang]:
    return [gang(f"ns/{queue}-{i}", 1, queue=queue, created=created + i) for i in range(count)]


def test_weights_share_within_each_level_of_the_tree() -> None:
    # t1 (weight 3) has two queues, t2 (weight 1) one, with many more queues under it:
    # flat, t2's four queues would take 4 of 8 cores; down the tree t2 gets 2.
    queues = [spec("org"), spec("t1", "org", 3), spec("t2", "org", 1),
              spec("a", "t1"), spec("b", "t1"),
              *(spec(f"c{i}", "t2") for i in range(4))]
    gangs = [*flood("a", 8), *flood("b", 8), *(g for i in range(4) for g in flood(f"c{i}", 8))]
    result = cycle([node("n1", 8)], gangs, queues=queues)
    got = Counter(key.split("/")[1].split("-")[0] for key in placed(result))
    assert (got["a"], got["b"]) == (3, 3)
    assert sum(got[f"c{i}"] for i in range(4)) == 2


def test_a_parents_cap_bounds_its_children_together_in_placement_and_admission() -> None:
    queues = [spec("team", cores=3), spec("x", "team"), spec("y", "team"), spec("other")]
    result = cycle([node("n1", 8)], [*flood("x", 4), *flood("y", 4), *flood("other", 4)],
                   queues=queues)
    got = Counter(key.split("/")[1].split("-")[0] for key in placed(result))
    assert got["x"] + got["y"] == 3 and got["other"] == 4
    waiting = [reason for key, reason in reasons(result).items() if "/other-" not in key]
    assert len(waiting) == 5
    assert all(isinstance(r, CapabilityExceeded) and r.queue == "team" for r in waiting)

    admission = cycle([node("n1", 8)], [gang("ns/big", 1, min_member=1, min_cpu=4, queue="x")],
                      queues=queues)
    refused = reasons(admission)["ns/big"]
    assert isinstance(refused, AdmissionOverCapability) and refused.queue == "team"
    assert refused.min_resources == cpu(4)


def test_a_queue_with_no_place_in_the_tree_makes_its_gangs_wait_and_disturbs_no_other() -> None:
    queues = [spec("orphan", "gone"), spec("shut", open_=False), spec("kid", "shut"),
              spec("fine")]
    result = cycle([node("n1", 8)],
                   [gang("ns/o", 1, queue="orphan"), gang("ns/k", 1, queue="kid"),
                    gang("ns/f", 1, queue="fine"), gang("ns/admitted", 1, queue="orphan")],
                   queues=queues, admitted=["ns/admitted"])
    assert placed(result) == ["ns/f"]
    assert reasons(result)["ns/o"] == QueueInvalid(
        QueueName("orphan"), "ParentMissing", QueueName("gone"))
    assert reasons(result)["ns/k"] == QueueClosed(QueueName("shut"))
    assert reasons(result)["ns/admitted"] == QueueInvalid(
        QueueName("orphan"), "ParentMissing", QueueName("gone"))
    unborn = cycle([node("n1", 8)], [gang("ns/u", 0, min_member=1, queue="orphan")],
                   queues=queues)
    assert [u.reason for u in unborn.unadmitted] == [
        QueueInvalid(QueueName("orphan"), "ParentMissing", QueueName("gone"))]


def test_only_leaf_queues_take_gangs_and_a_parents_running_gangs_keep_running() -> None:
    queues = [spec("team"), spec("q1", "team"), spec("q2", "team"), spec("other")]
    team = QueueName("team")
    running = gang("ns/running", 0, min_member=1, bound=1, queue="team")
    result = cycle(
        [node("n1", 4)],
        [running, gang("ns/own", 1, queue="team"), gang("ns/leaf", 1, queue="q1"),
         gang("ns/o", 1, queue="other")],
        bound_pods=[pod("ns/running-0", 2, gang="ns/running", on="n1")],
        bound_requests={"ns/running": cpu(2)},
        queues=queues,
    )
    assert sorted(placed(result)) == ["ns/leaf", "ns/o"]
    assert reasons(result) == {"ns/own": QueueNotLeaf(team, (QueueName("q1"), QueueName("q2")))}
    assert not result.preemptions
    unborn = cycle([node("n1", 4)], [gang("ns/u", 0, min_member=1, queue="team")],
                   queues=queues)
    assert [u.reason for u in unborn.unadmitted] == [
        QueueNotLeaf(team, (QueueName("q1"), QueueName("q2")))]


@st.composite
def capped_trees(draw: st.DrawFn) -> list[QueueSpec]:
    """Random trees of up to six queues, each parent made before its children, some capped."""
    queues: list[QueueSpec] = []
    for i in range(draw(st.integers(1, 6))):
        parent = draw(st.sampled_from([None, *(q.name for q in queues)]))
        cores = draw(st.none() | st.integers(0, 8))
        queues.append(spec(f"q{i}", parent, draw(st.integers(1, 4)), cores))
    return queues


@settings(max_examples=60, deadline=None)
@given(capped_trees(), st.data())
def test_no_cap_anywhere_in_the_tree_is_exceeded_by_what_a_cycle_places(
    queues: list[QueueSpec], data: st.DataObject
) -> None:
    names = [q.name for q in queues]
    gangs = [gang(f"ns/g{i}", data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2)),
                  queue=data.draw(st.sampled_from(names)), created=i)
             for i in range(data.draw(st.integers(1, 12)))]
    result = cycle([node("n1", 8), node("n2", 8)], gangs, queues=queues)
    tree = build_tree({q.name: q for q in queues})
    by_key = {g.key: g for g in gangs}
    used = {name: 0 for name in names}
    for placement in result.placements:
        queue = by_key[placement.gang].queue
        used[queue] += sum(p.requests.get("cpu") for p in by_key[placement.gang].pending
                           if p.key in {k for k, _ in placement.assignments})
    for q in queues:
        if q.capability is not None:
            held = sum(used[name] for name in tree.below[q.name])
            assert q.capability.allows(cpu(held // 1000)), (q.name, held)


def test_a_closed_team_keeps_its_running_usage_under_its_parents_cap() -> None:
    # org may hold 4 cpu; its team's queue runs 4 and the team is then Closed: the
    # org's other queue still finds the org full, and the team's new gangs wait.
    queues = [spec("org", cores=4), spec("team", "org", open_=False), spec("kid", "team"),
              spec("other", "org")]
    running = gang("ns/running", 0, min_member=1, bound=4, queue="kid")
    result = cycle([node("n1", 16)], [running, *flood("other", 2), gang("ns/new", 1, queue="kid")],
                   queues=queues, bound_requests={"ns/running": cpu(4)})
    assert placed(result) == []
    waiting = reasons(result)
    capped = [waiting[f"ns/other-{i}"] for i in range(2)]
    assert all(isinstance(r, CapabilityExceeded) and (r.queue, r.allocated) == ("org", cpu(4))
               for r in capped)
    assert waiting["ns/new"] == QueueClosed(QueueName("team"))
