"""The mirror keeps each view's parts as events arrive; they must equal a view
built from scratch out of the pods, assumptions and nodes it holds, whatever
the order of watch events, re-lists, assumptions, finished binds, forgets and
expiries; and no assumption expires before its bind finished. A terminating pod
still takes its node's room but is no member."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.model.objects import GangKey, NodeName, PodKey
from gangsched.core.placement.capacity import Placement, Snapshot
from gangsched.core.stages.gangs import Member
from gangsched.feed import Feed
from gangsched.mirror import Mirror

NODES = ["n1", "n2", "n3"]
PODS = ["a", "b", "c"]


def node(name: str, cpu: int) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"allocatable": {"cpu": str(cpu), "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, cpu: int, on: str | None, phase: str, ours: bool,
        deleting: bool = False, host_port: bool = False,
        group: str | None = "g") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": "gang" if ours else "default-scheduler",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{cpu}m"}}}],
    }
    if host_port:  # a host port is a required anti-affinity to the inter-pod rules
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    if on is not None:
        spec["nodeName"] = on
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                            "labels": {"scheduling.gangsched.io/pod-group": group} if group
                            else {},
                            "creationTimestamp": "2026-01-01T00:00:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


pods = st.builds(pod, st.sampled_from(PODS), st.integers(0, 3000),
                 st.sampled_from([None, None, None, *NODES, "gone"]),
                 st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]), st.booleans(),
                 st.booleans(), st.booleans(), st.sampled_from(["g", "h", None]))
nodes = st.builds(node, st.sampled_from(NODES), st.integers(1, 64))
steps = st.one_of(
    st.tuples(st.just("pod"), pods),
    st.tuples(st.just("delete pod"), st.sampled_from(PODS)),
    st.tuples(st.just("node"), nodes),
    st.tuples(st.just("delete node"), st.sampled_from(NODES)),
    st.tuples(st.just("relist pods"), st.lists(pods, max_size=5)),
    st.tuples(st.just("relist nodes"), st.lists(nodes, max_size=3)),
    st.tuples(st.just("assume"), st.tuples(st.sampled_from(PODS), st.sampled_from(NODES))),
    st.tuples(st.just("finish binding"), st.sampled_from(PODS)),
    st.tuples(st.just("forget"), st.sampled_from(PODS)),
    st.tuples(st.just("expire"), st.floats(0, 20)),
)


def apply(mirror: Mirror, step: tuple[str, Any], now: float) -> None:
    what, arg = step
    if what == "pod":
        Feed(mirror).upsert("pods", arg)
    elif what == "delete pod":
        Feed(mirror).delete("pods", {"metadata": {"namespace": "ns", "name": arg}})
    elif what == "node":
        Feed(mirror).upsert("nodes", arg)
    elif what == "delete node":
        Feed(mirror).delete("nodes", {"metadata": {"name": arg}})
    elif what == "relist pods":
        Feed(mirror).replace("pods", arg)
    elif what == "relist nodes":
        Feed(mirror).replace("nodes", arg)
    elif what == "assume":
        name, on = arg
        mirror.assume(Placement(GangKey("ns/g"), ((PodKey(f"ns/{name}"), NodeName(on)),)), now)
    elif what == "finish binding":
        mirror.finish_binding(PodKey(f"ns/{arg}"), now)
    elif what == "forget":
        mirror.forget(PodKey(f"ns/{arg}"))
    else:
        mirror.expire(now + arg, ttl=10.0)


def from_scratch(mirror: Mirror) -> tuple[Snapshot, tuple[Member, ...], frozenset[GangKey]]:
    """What a view is, computed in one pass over every pod held."""
    placed = []
    members = []
    for key, record in mirror.pods.items():
        pod = record.pod
        assumed = mirror.assumed.get(key)
        if assumed is not None and pod.node_name is None:
            pod = replace(pod, node_name=assumed.node)
        placed.append(pod)
        if record.ours and not pod.terminating:
            members.append(Member(pod=pod, group=record.group,
                                  running=record.phase == "Running",
                                  succeeded=record.phase == "Succeeded",
                                  failed=record.phase == "Failed"))
    named = frozenset(record.group for record in mirror.pods.values()
                      if not record.ours and record.group is not None)
    return Snapshot.build(mirror.nodes.values(), placed), tuple(members), named


@settings(max_examples=500, deadline=None)
@given(st.lists(steps, max_size=40))
def test_a_view_kept_as_events_arrive_equals_one_built_from_every_pod(
        history: list[tuple[str, Any]]) -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    Feed(mirror).replace("nodes", [node(name, 8) for name in NODES])
    for index, step in enumerate(history):
        unfinished = {k for k, a in mirror.assumed.items() if a.bound_at is None}
        apply(mirror, step, now=float(index))
        if step[0] == "expire":
            assert unfinished <= set(mirror.assumed), "an unfinished bind's assumption expired"
        view = mirror.view()
        snapshot, members, named_by_others = from_scratch(mirror)
        assert dict(view.snapshot.nodes) == dict(snapshot.nodes)
        assert view.snapshot.holds_anti_affinity == snapshot.holds_anti_affinity
        held = {term for pod in snapshot.seated() if pod.node_name and not pod.terminal
                for term in pod.anti_affinity} if snapshot.seated else set()
        assert set(view.snapshot.anti_affinity_terms or ()) == held
        assert sorted(view.members, key=lambda m: m.pod.key) == sorted(
            members, key=lambda m: m.pod.key)
        assert view.named_by_others == named_by_others
