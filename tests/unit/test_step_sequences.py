"""Many steps in a row through :func:`gangsched.core.step.step`, with the state it returns
carried into the next and the outcomes of its binds folded in as the shell folds them.

The world is a mirror fed raw API objects, as the watches feed it. Between steps
binds succeed (the watch reports the pod on its node), are refused (the pod backs
off), or are lost (the call returned but the watch never confirms: the
assumption expires), and members terminate, go, and are created again under
their names with a new UID. After every step, whatever happened before:

* no node holds more than its allocatable, counting terminating pods and
  assumptions (binds handed out and not yet confirmed);
* no gang is handed out below its minMember: what a step binds of a gang and
  what of it is already bound or on its way reach minMember;
* no gang that could run now is told it does not fit, and no gang waits
  behind a starving gang that can never be whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.actions import Bind
from gangsched.core.model.objects import Flavor, Gang, NodeName, PodKey
from gangsched.core.placement.capacity import Placement, place_gang
from gangsched.core.reasons import DoesNotFit, HeldForStarving, ReservedByAdmitted, Starving
from gangsched.core.state import State, bind_refused, binds_done
from gangsched.core.step import StepConfig, step
from gangsched.core.view import StepView, gather_view
from gangsched.feed import Feed
from gangsched.mirror import Mirror

GROUP_LABEL = "scheduling.gangsched.io/pod-group"
NAMESPACE = "ns"
NODES = {"n1": 4, "n2": 4, "n3": 2}
ASSUME_TTL_S = 3.0
CONFIG = StepConfig(starvation_s=2.0, replacement_grace_s=3.0)


def node(name: str, cores: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
            "status": {"allocatable": {"cpu": str(cores), "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def group(name: str, min_member: int) -> dict[str, Any]:
    return {"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"uid-{name}",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"minMember": min_member}}


def member(gang: str, index: int, cores: int, generation: int) -> dict[str, Any]:
    name = f"{gang}-{index}"
    return {"metadata": {"name": name, "namespace": NAMESPACE, "uid": f"{name}-{generation}",
                         "labels": {GROUP_LABEL: gang},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"schedulerName": "gang", "containers": [
                {"name": "main", "resources": {"requests": {"cpu": str(cores)}}}]},
            "status": {"phase": "Pending"}}


@dataclass(frozen=True)
class Spec:
    name: str
    min_member: int
    pods: int
    cores: int


@dataclass
class World:
    mirror: Mirror
    specs: dict[str, Spec]
    raw: dict[PodKey, dict[str, Any]] = field(default_factory=dict)
    queued: list[tuple[PodKey, NodeName]] = field(default_factory=list)
    """Binds handed out, in order, not yet answered."""
    lost: set[PodKey] = field(default_factory=set)
    """Binds whose call returned but whose pod the watch never shows bound."""
    generation: int = 0
    state: State = field(default_factory=State)
    now: float = 0.0

    @property
    def feed(self) -> Feed:
        return Feed(self.mirror)

    def member(self, spec: Spec, index: int) -> dict[str, Any]:
        """The API object of member ``index`` of ``spec`` created now, under a new UID."""
        return member(spec.name, index, spec.cores, self.generation)


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Spec]:
    out = {}
    for i in range(draw(st.integers(2, 4))):
        min_member = draw(st.integers(1, 3))
        pods = draw(st.integers(max(1, min_member - 1), min_member + 1))
        out[f"g{i}"] = Spec(f"g{i}", min_member, pods, draw(st.integers(1, 2)))
    return out


EVENTS = st.lists(
    st.tuples(st.sampled_from(["bind", "refuse", "lose", "terminate", "gone", "again"]),
              st.integers(0, 20)),
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(specs=specs(), steps=st.lists(EVENTS, min_size=3, max_size=8))
def test_step_keeps_its_promises_while_binds_fail_and_members_come_and_go(
    specs: dict[str, Spec], steps: list[list[tuple[str, int]]]
) -> None:
    world = World(Mirror(scheduler_names=frozenset({"gang"})), specs)
    world.feed.replace("nodes", [node(name, cores) for name, cores in NODES.items()])
    for spec in specs.values():
        world.feed.upsert_group(Flavor.GANGSCHED, group(spec.name, spec.min_member))
        for index in range(spec.pods):
            _create(world, spec, index)
    for events in steps:
        world.now += 1.0
        for kind, index in events:
            _happen(world, kind, index)
        for key in world.mirror.expire(world.now, ASSUME_TTL_S):
            world.lost.discard(key)
        _step(world)


def _create(world: World, spec: Spec, index: int) -> None:
    world.generation += 1
    raw = world.member(spec, index)
    world.raw[PodKey(f"{NAMESPACE}/{spec.name}-{index}")] = raw
    world.feed.upsert("pods", raw)


def _happen(world: World, kind: str, index: int) -> None:
    """One outcome or change between steps, picked among those possible now."""
    if kind in ("bind", "refuse", "lose") and world.queued:
        key, node_name = world.queued.pop(index % len(world.queued))
        if key not in world.mirror.pods:
            return  # the pod went meanwhile: its assumption went with it
        if kind == "refuse":
            world.mirror.forget(key)
            world.state = bind_refused(world.state, key, now=world.now, status=409,
                                       message="refused")
            return
        world.mirror.finish_binding(key, world.now)
        world.state = binds_done(world.state, [key])
        if kind == "lose":
            world.lost.add(key)
            return
        raw = world.raw[key]
        raw["spec"]["nodeName"], raw["status"]["phase"] = node_name, "Running"
        world.feed.upsert("pods", raw)
        return
    bound = sorted(k for k, raw in world.raw.items() if raw["spec"].get("nodeName"))
    if kind == "terminate" and bound:
        raw = world.raw[bound[index % len(bound)]]
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
        world.feed.upsert("pods", raw)
    elif kind == "gone":
        leaving = sorted(k for k in bound if "deletionTimestamp" in world.raw[k]["metadata"])
        if leaving:
            key = leaving[index % len(leaving)]
            world.feed.delete("pods", world.raw.pop(key))
    elif kind == "again":
        missing = [(spec, i) for spec in world.specs.values() for i in range(spec.pods)
                   if PodKey(f"{NAMESPACE}/{spec.name}-{i}") not in world.raw]
        if missing:
            _create(world, *missing[index % len(missing)])


def _step(world: World) -> None:
    mirror = world.mirror
    view = mirror.view()
    before = view.snapshot
    stepped = step(world.state, StepView(view), world.now, CONFIG)
    world.state = stepped.state
    binds = [action.placement for action in stepped.actions if isinstance(action, Bind)]
    _check_binds(world, binds)
    for placement in binds:
        mirror.assume(placement, world.now)
        world.queued.extend(placement.assignments)
    _check_rooms(world)
    _check_waiting(world, stepped.result.unplaceable, before, binds)


def _check_binds(world: World, binds: list[Placement]) -> None:
    """A gang is handed out whole: with what of it is bound or assumed, minMember."""
    for placement in binds:
        spec = world.specs[placement.gang.split("/", 1)[1]]
        held = [key for key in world.mirror.pods
                if key.startswith(f"{NAMESPACE}/{spec.name}-") and world.mirror.is_placed(key)
                and "deletionTimestamp" not in world.raw[key]["metadata"]]
        assert len(held) + len(placement.assignments) >= spec.min_member, (
            f"{placement.gang} handed out below minMember: {placement.assignments}, had {held}")


def _check_rooms(world: World) -> None:
    """Every node within its allocatable, terminating pods and assumptions counted."""
    for name, usage in world.mirror.view().snapshot.nodes.items():
        assert usage.requested.fits(usage.node.allocatable), (
            f"{name} over its allocatable: {usage.requested} of {usage.node.allocatable}")


def _check_waiting(world: World, unplaceable: Any, before: Any, binds: list[Placement]) -> None:
    """A gang told it does not fit does not fit; none waits behind a hopeless one.

    "Fits" is asked of the cluster as the step saw it, so only of a step that
    moved no room and kept none back (no bind, no hold, no starving gang).
    """
    still = not binds and not world.state.holds and not any(
        isinstance(u.reason, Starving) for u in unplaceable)
    gangs = {gang.key: gang for gang in _gangs(world)}
    for waiting in unplaceable:
        reason = waiting.reason
        if still and isinstance(reason, DoesNotFit) and waiting.gang in gangs:
            decision = place_gang(before, gangs[waiting.gang])
            assert not isinstance(decision, Placement), f"{waiting.gang} fits yet waits"
        starving = reason.starving if isinstance(
            reason, ReservedByAdmitted | HeldForStarving) else None
        if isinstance(reason, Starving):
            starving = waiting.gang
        if starving is not None:
            spec = world.specs[starving.split("/", 1)[1]]
            present = sum(1 for key in world.raw if key.startswith(f"{NAMESPACE}/{spec.name}-"))
            assert present >= spec.min_member, f"waiting behind {starving}, never whole"


def _gangs(world: World) -> list[Gang]:
    gathering = gather_view(world.mirror.view(), frozenset(), {}, frozenset())
    return list(gathering.gathered.gangs)

