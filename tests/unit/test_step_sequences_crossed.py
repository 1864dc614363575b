"""The world of :mod:`tests.unit.test_step_sequences`, with every policy on at once.

Random clusters cross every dimension: GPUs published as ResourceSlices under
two DeviceClasses and asked through claims (made from a template per pod,
shared by the pods of a gang, with admin access), pods in no PodGroup, a
capped queue tree whose queues close and open again, priorities (a gang with
one tiny high-priority pod among low ones), preemption and reclaim, backfill
(expected runtimes), starvation holds and replacement holds, a Topology of
blocks and racks that gangs require or prefer a rack of, and whose sub-groups
each require one (or whose pod names a sub-group not listed), native
CompositePodGroups whose child PodGroups are such sub-groups, Karpenter: a
NodePool appears or changes its cpu limit, and launches nodes that use it
up, and jobs whose admission Kueue decides (their PodGroup, with minResources,
owned by a job whose Kueue Workload is admitted or not, and turns). Between steps
binds succeed, are refused or are lost; claim writes are accepted, refused
or lost (applied, but the call failed); members terminate, go and come back;
evicted pods terminate, then go.

The world answers as the API server and the controllers would: a claim write
applies its allocation only to an unallocated claim of the version it read,
adds its consumers to ``reservedFor`` by UID, and refuses a reservation of a
claim with no allocation; the shell takes back the writes of a gang one of
whose writes failed; the resource-claim controller makes a pod's claim from
its template when the pod is created, deletes it when the pod goes, and
frees a shared claim once its last consumer is gone.

After every step, whatever happened before:

* no device is allocated to two claims (admin access aside); no node holds
  more than its allocatable;
* no gang is handed out below its minMember, nor with no pod;
* no gang requiring a rack has members placed in two racks, nor a sub-group;
* no gang is handed out while a pending pod of it names an unknown sub-group;
* no queue holds more than any capability on its way up, counting the
  devices its claims hold (a device counts for the DeviceClass it was asked
  by, under ``deviceclass.resource.kubernetes.io/<class>`` and the class's
  ``extendedResourceName``) and its pods in no PodGroup, Closed queues
  included;
* room kept for the starving gang, or for the replacement of a member a
  running gang lost, devices included, is not given to another gang (a gang
  expected to end before the starving gang's reservation aside);
* a priority preemption evicts only gangs of lower priority, a gang's
  priority being its lowest member's;
* no gang evicted by reclaim evicts, by priority, the gang it was evicted
  for (or the reverse) while nothing else changed;
* a waiting pod says ``Unschedulable`` exactly when the reason its gang shows
  wants room (never a NodePool limit or a pause in asking); the gangs asking a
  NodePool with a limit never ask together for more than it leaves.
* a gang whose Kueue Workload is not admitted is neither bound, admitted,
  starving nor a preemptor: it holds no room.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from devcluster import fakedriver
from gangsched.core.actions import Bind, Evict, MarkUnschedulable
from gangsched.core.asking import (
    MADE_BY_NODEPOOL,
    AskLimits,
    Coming,
    nodes_coming,
    wants_room,
)
from gangsched.core.dra.parse import allocation_to_api
from gangsched.core.dra.placing import ClaimWrite
from gangsched.core.kubeobjects.composites import composite_gang_key
from gangsched.core.kubeobjects.podgroups import QUEUE_ANNOTATION, SUB_GROUP_LABEL
from gangsched.core.model.objects import Flavor, Gang, GangKey, NodeName, NodePool, PodKey
from gangsched.core.model.resources import CPU, DEVICE_CLASS_PREFIX, Resources
from gangsched.core.model.runtimes import RUNTIME_ANNOTATION, backfills
from gangsched.core.placement.capacity import Placement
from gangsched.core.queues.fairness import gang_order
from gangsched.core.reasons import AskingPaused, NodePoolLimit, Starving, SuspendedByKueue
from gangsched.core.stages.gangs import Member
from gangsched.core.state import Asked, bind_refused
from gangsched.core.step import StepConfig, Stepped, step
from gangsched.core.view import StepView
from gangsched.mirror import Mirror
from tests.unit.test_step_sequences import (
    ASSUME_TTL_S,
    GROUP_LABEL,
    NAMESPACE,
    Spec,
    World,
    _check_rooms,
    _create,
    _gangs,
    _happen,
    group,
    node,
)

CONFIG = StepConfig(starvation_s=1.0, replacement_grace_s=3.0, preemption=True, reclaim=True,
                    preemption_timeout_s=4.0, reclaim_interval_s=2.0,
                    asking=AskLimits(node_hold_s=4.0, backoff_s=3.0))

GPUS = {"n1": ("H100", 4), "n2": ("A100", 4), "n3": ("H100", 0)}
"""Each node's GPU model and count; every node has 4 cpu but n3, which has 2."""
H100 = "h100.example.com"
ANY = "any.example.com"
CLASSES = {H100: "example.com/h100", ANY: None}
"""Each DeviceClass and its extendedResourceName: H100s only, or every GPU."""
PRIORITIES = {"low": 0, "mid": 500, "high": 1000}
QUEUES = {"org": None, "team": "org", "a": "team", "z": "org", "c": None, "default": None}
"""Each queue and its parent; the leaves take work."""
LEAVES = ("a", "z", "c", "default")
BLOCK, RACK = "example.com/block", "example.com/rack"
RACKS = {"n1": ("b0", "r1"), "n2": ("b0", "r2"), "n3": ("b1", "r3")}
"""Each node's block and rack: a Topology ``fabric`` names both levels."""
PATIENT_S = 3
"""The ``preferredWaitSeconds`` of a gang patient for a rack: three steps."""
LAUNCHED = ("b1", "r4")
"""The block and rack of every node Karpenter launches."""
POOL_CPU = (None, 2, 6, 100)
"""The NodePool's cpu limits, by the index of the event that sets it (None: no limits)."""


@dataclass(frozen=True)
class CrossedSpec(Spec):
    """A gang (or, ``lone``, that many pods in no PodGroup) and how its pods ask."""

    lone: bool = False
    queue: str = "default"
    priority: str = "low"
    tiny: bool = False
    """Its first pod asks 100m cpu at priority ``high``, whatever the others ask."""
    claim: str = "none"
    """``template`` (one claim per pod), ``shared`` (one claim for every pod), ``admin``
    (a claim per pod with admin access to devices in use), or ``none``."""
    gpus: int = 1
    device_class: str = H100
    runtime: int | None = None
    level: str = "none"
    """``required`` or ``preferred``: how its PodGroup asks for one rack; ``patient``:
    preferred, waiting ``PATIENT_S`` for one before a wider level; or ``none``."""
    sub: str = "none"
    """``racks``: its pods in turn in sub-groups s0 and s1, each required in one rack;
    ``unknown``: its first pod names a sub-group its PodGroup does not list; or ``none``."""
    kueue: bool = False
    """Its PodGroup, asking its whole job's cpu as minResources, is owned by a job whose
    admission Kueue decides: its Workload starts not admitted."""
    native: bool = False
    """With ``racks``: a native CompositePodGroup instead of a PodGroup, requiring a rack
    (``required``) or a block, its sub-groups two native child PodGroups each requiring a
    rack, whose pods name their child by ``spec.schedulingGroup``."""

    def gang_of(self, pod: PodKey) -> GangKey:
        """The gang a pod of this spec is in: its PodGroup, or itself alone."""
        if self.lone:
            return GangKey(f"{NAMESPACE}/pod:{pod.split('/', 1)[1]}")
        if self.native:
            return composite_gang_key(NAMESPACE, self.name)
        return GangKey(f"{NAMESPACE}/{self.name}")

    def devices_of(self, pod: PodKey) -> int:
        """Free devices the pod takes when placed (a shared claim's are its first pod's,
        admin access takes none)."""
        tiny = self.tiny and pod.endswith("-0")
        return self.gpus if self.claim == "template" and not tiny else 0


@dataclass(frozen=True)
class Eviction:
    at: int
    reclaim: bool
    preemptor: GangKey
    victims: frozenset[GangKey]
    pods: dict[PodKey, tuple[str, bool, bool]]
    """Every pod's UID, whether placed, whether terminating, when it was decided."""
    queues: tuple[tuple[str, str], ...]


@dataclass
class CrossedWorld(World):
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    claims: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The ResourceClaims the API server holds, by ``namespace/name``."""
    version: int = 0
    fates: list[str] = field(default_factory=list)
    """What becomes of each claim write, in turn: ``ok``, ``refuse``, ``lose``."""
    evictions: list[Eviction] = field(default_factory=list)
    evicted: list[PodKey] = field(default_factory=list)
    """Victim pods terminating since the last step: they are gone by the next."""
    steps: int = 0
    nodepool: dict[str, Any] | None = None
    """Karpenter's one NodePool, once it exists."""
    launched: int = 0
    kueue_admitted: dict[str, bool] = field(default_factory=dict)
    """Whether Kueue admitted each job, by its gang's name."""

    def spec_of(self, pod: PodKey) -> CrossedSpec:
        spec = self.specs[pod.split("/", 1)[1].rsplit("-", 1)[0]]
        assert isinstance(spec, CrossedSpec)
        return spec

    def member(self, spec: Spec, index: int) -> dict[str, Any]:
        assert isinstance(spec, CrossedSpec)
        name = f"{spec.name}-{index}"
        tiny = spec.tiny and index == 0
        priority = "high" if tiny else spec.priority
        annotations = {}
        if spec.lone and spec.queue != "default":
            annotations[QUEUE_ANNOTATION] = spec.queue
        if spec.lone and spec.runtime is not None:
            annotations[RUNTIME_ANNOTATION] = f"{spec.runtime}s"
        container: dict[str, Any] = {"name": "main", "resources": {
            "requests": {"cpu": "100m" if tiny else f"{spec.cores * 500}m"}}}
        raw: dict[str, Any] = {
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "uid": f"{name}-{self.generation}", "annotations": annotations,
                         "labels": {} if spec.lone or spec.native else {
                             GROUP_LABEL: spec.name, **sub_group_label(spec, index)},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"schedulerName": "gang", "priority": PRIORITIES[priority],
                     "priorityClassName": priority, "containers": [container]},
            "status": {"phase": "Pending"}}
        if spec.native:
            raw["spec"]["schedulingGroup"] = {"podGroupName": f"{spec.name}s{index % 2}"}
        if spec.claim != "none" and not tiny:
            container["resources"]["claims"] = [{"name": "gpus"}]
            if spec.claim == "shared":
                raw["spec"]["resourceClaims"] = [
                    {"name": "gpus", "resourceClaimName": f"{spec.name}-shared"}]
            else:
                made = f"{name}-gpus-{self.generation}"
                raw["spec"]["resourceClaims"] = [
                    {"name": "gpus", "resourceClaimTemplateName": f"{spec.name}-gpus"}]
                raw["status"]["resourceClaimStatuses"] = [
                    {"name": "gpus", "resourceClaimName": made}]
                self.put_claim(claim(made, spec, owner=raw["metadata"]))
        return raw

    def put_claim(self, raw: dict[str, Any]) -> None:
        self.version += 1
        raw["metadata"]["resourceVersion"] = str(self.version)
        self.claims[f"{NAMESPACE}/{raw['metadata']['name']}"] = raw
        self.feed.upsert("resourceclaims", raw)


def sub_group_label(spec: CrossedSpec, index: int) -> dict[str, str]:
    """The sub-group label of the spec's pod ``index``: s0 and s1 in turn, or, for a spec
    whose first pod names an unknown sub-group, ``nope`` on that one."""
    if spec.sub == "racks":
        return {SUB_GROUP_LABEL: f"s{index % 2}"}
    if spec.sub == "unknown" and index == 0:
        return {SUB_GROUP_LABEL: "nope"}
    return {}


def topology_of(spec: CrossedSpec) -> dict[str, Any] | None:
    """Its PodGroup's ``spec.topology``: a rack asked, sub-groups listed, both, or none."""
    if spec.level == "none" and spec.sub == "none":
        return None
    topology: dict[str, Any] = {"name": "fabric"}
    if spec.level == "patient":
        topology.update(preferred=RACK, preferredWaitSeconds=PATIENT_S)
    elif spec.level != "none":
        topology[spec.level] = RACK
    if spec.sub != "none":
        topology["subGroups"] = [{"name": f"s{k}", "minMember": 1, "required": RACK}
                                 for k in range(2)]
    return topology


def composite_of(spec: CrossedSpec) -> list[dict[str, Any]]:
    """A native spec's CompositePodGroup and its two child PodGroups, whose minCounts add
    up to the spec's minMember (each at least 1)."""
    meta = {"namespace": NAMESPACE, "creationTimestamp": "2026-01-01T00:00:00Z"}
    ref = {"workloadName": spec.name, "templateName": spec.name}
    counts = (max(1, (spec.min_member + 1) // 2), max(1, spec.min_member // 2))
    return [
        {"metadata": {**meta, "name": spec.name, "uid": f"uid-{spec.name}",
                      "annotations": {QUEUE_ANNOTATION: spec.queue}},
         "spec": {"workloadRef": ref, "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                  "schedulingConstraints": {"topology": [
                      {"key": RACK if spec.level == "required" else BLOCK}]}}},
        *({"metadata": {**meta, "name": f"{spec.name}s{k}", "uid": f"uid-{spec.name}s{k}"},
           "spec": {"parentCompositePodGroupName": spec.name, "workloadRef": ref,
                    "schedulingPolicy": {"gang": {"minCount": count}},
                    "schedulingConstraints": {"topology": [{"key": RACK}]}}}
          for k, count in enumerate(counts))]


def claim(name: str, spec: CrossedSpec, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": spec.device_class, "count": spec.gpus}
    if spec.claim == "admin":
        request["adminAccess"] = True
    meta: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "uid": f"claim-{name}"}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner["name"],
                                    "uid": owner["uid"], "controller": True}]
    return {"apiVersion": fakedriver.API_VERSION, "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": request}]}},
            "status": {}}


def kueue_workload(name: str, admitted: bool) -> dict[str, Any]:
    """The Kueue Workload of gang ``name``'s job, owned by the job as its PodGroup is."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"job-{name}", "namespace": NAMESPACE, "uid": f"wl-{name}",
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": name, "uid": f"job-{name}",
                                              "controller": True}]},
            "status": {"conditions": [{"type": "Admitted",
                                       "status": "True" if admitted else "False"}]}}


def device_class(name: str) -> dict[str, Any]:
    expression = f'device.driver == "{fakedriver.DRIVER}"'
    if name == H100:
        expression += f' && device.attributes["{fakedriver.DRIVER}"].model == "H100"'
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if CLASSES[name]:
        spec["extendedResourceName"] = CLASSES[name]
    return {"apiVersion": fakedriver.API_VERSION, "kind": "DeviceClass",
            "metadata": {"name": name}, "spec": spec}


def queue(name: str, weight: int, capability: dict[str, str] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight, "state": "Open"}
    if QUEUES[name]:
        spec["parent"] = QUEUES[name]
    if capability is not None:
        spec["capability"] = capability
    return {"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name, "uid": f"uid-{name}"}, "spec": spec}


CAPPED = st.sampled_from([CPU, f"{DEVICE_CLASS_PREFIX}{H100}", "example.com/h100",
                          f"{DEVICE_CLASS_PREFIX}{ANY}"])
"""What a capability may name: cpu, or devices by their class or its extended resource."""


@st.composite
def queues(draw: st.DrawFn) -> list[dict[str, Any]]:
    out = []
    for name in QUEUES:
        capability = None
        if draw(st.integers(0, 2)) == 0:
            capability = {resource: str(draw(st.integers(1, 4)))
                          for resource in draw(st.lists(CAPPED, min_size=1, max_size=2))}
        out.append(queue(name, draw(st.integers(1, 3)), capability))
    return out


@st.composite
def crossed_specs(draw: st.DrawFn) -> dict[str, CrossedSpec]:
    out = {}
    for i in range(draw(st.integers(2, 4))):
        lone = draw(st.booleans())
        min_member = 1 if lone else draw(st.integers(1, 3))
        pods = draw(st.integers(1, 2)) if lone else draw(
            st.integers(max(1, min_member - 1), min_member + 1))
        sub = "none" if lone else draw(st.sampled_from(["none", "none", "racks", "unknown"]))
        kueue = not lone and draw(st.integers(0, 2)) == 0
        native = sub == "racks" and not kueue and draw(st.booleans())
        out[f"g{i}"] = CrossedSpec(
            f"g{i}", min_member, pods, draw(st.integers(1, 4)), lone=lone,
            queue=draw(st.sampled_from([*LEAVES, "a"])),
            priority=draw(st.sampled_from(sorted(PRIORITIES))),
            tiny=not lone and pods > 1 and draw(st.booleans()),
            claim=draw(st.sampled_from(["none", "template", "template", "template", "shared",
                                        "admin"])),
            gpus=draw(st.integers(1, 4)), device_class=draw(st.sampled_from([H100, H100, ANY])),
            runtime=None if native else draw(st.sampled_from([None, 2, 20])),
            level=draw(st.sampled_from(["none", "none", "required", "preferred", "patient"])),
            sub=sub, kueue=kueue, native=native)
    return out


def shape(*specs: CrossedSpec, caps: dict[str, dict[str, str]] | None = None
          ) -> tuple[dict[str, CrossedSpec], list[dict[str, Any]]]:
    """Gangs, and the queue tree with weight 1 and the given capabilities."""
    return ({spec.name: spec for spec in specs},
            [queue(name, 1, (caps or {}).get(name)) for name in QUEUES])


BIND = ("bind", 0)
SEEN = {
    "a queue capped at 2 H100s runs a claim of 4": (shape(
        CrossedSpec("g0", 1, 1, 1, queue="c", claim="template", gpus=4),
        caps={"c": {f"{DEVICE_CLASS_PREFIX}{H100}": "2"}}), [([], [])] * 3),
    "a cap named by the class's extended resource": (shape(
        CrossedSpec("g0", 1, 1, 1, queue="c", claim="template", gpus=4),
        caps={"c": {"example.com/h100": "2"}}), [([], [])] * 3),
    "lone pods run past their queue's cap once bound": (shape(
        CrossedSpec("g0", 1, 2, 2, lone=True), CrossedSpec("g1", 1, 2, 2, lone=True),
        caps={"default": {CPU: "2"}}), [([], []), ([BIND] * 4, []), ([], [])]),
    "a lone pod's queue annotation is its queue": (shape(
        CrossedSpec("g0", 1, 1, 2, lone=True, queue="a"), CrossedSpec("g1", 1, 1, 1, queue="a"),
        caps={"org": {CPU: "1"}}), [([], [])] * 3),
    "closing a team drops its usage from the organisation's cap": (shape(
        CrossedSpec("g0", 2, 2, 4, queue="a"), CrossedSpec("g1", 2, 2, 2, queue="z"),
        caps={"org": {CPU: "4"}}),
        [([], []), ([BIND] * 2, []), ([("close", sorted(QUEUES).index("team"))], []),
         ([], [])]),
    "a placement with admin access undone frees another claim's device": (shape(
        CrossedSpec("g0", 1, 1, 1, lone=True, queue="a", priority="high", claim="template",
                    device_class=ANY),
        CrossedSpec("g1", 1, 2, 2, queue="a", priority="high", claim="admin", device_class=ANY),
        CrossedSpec("g2", 1, 1, 1, queue="a", priority="high", claim="template",
                    device_class=ANY),
        caps={"org": {CPU: "1"}}), [([], [])] * 3),
    "one-GPU pods take the devices a starving gang waits for": (shape(
        CrossedSpec("g0", 1, 1, 1, priority="high", claim="template", gpus=2),
        CrossedSpec("g1", 1, 1, 1, priority="mid", claim="template", gpus=4),
        CrossedSpec("g2", 1, 1, 1, lone=True, claim="template")),
        [([], []), ([BIND] * 2, []), ([("terminate", 1)], []), ([("gone", 0)], []),
         ([("again", 0)], []), ([], [])]),
    "another gang takes the GPUs of a lost worker": (shape(
        CrossedSpec("g0", 2, 2, 1, queue="c", priority="high", claim="template", gpus=2),
        CrossedSpec("g1", 1, 1, 1, queue="c", claim="template", gpus=2)),
        [([], []), ([BIND] * 2, []), ([("terminate", 0)], []), ([("gone", 0)], []),
         ([], [])]),
    "a pod asking no device runs while a starving gang's lost member holds its GPUs": (shape(
        CrossedSpec("g0", 2, 3, 1, queue="c", priority="high", claim="template", gpus=2),
        CrossedSpec("g1", 1, 1, 1, lone=True, queue="c", priority="high")),
        [([], []), ([BIND, BIND, ("lose", 0)], []), ([], []), ([], []), ([], []),
         ([("terminate", 0)], [])]),
    "reclaim and priority preemption undo each other": (shape(
        CrossedSpec("g0", 2, 2, 4, queue="c", priority="high"),
        CrossedSpec("g1", 2, 2, 4, queue="c", priority="high"),
        CrossedSpec("g2", 1, 1, 2, queue="c", priority="high"),
        CrossedSpec("g3", 1, 1, 4)),
        [([], []), *[([BIND] * 6, []), ([("gone", 0)] * 4, []), ([("again", 0)] * 4, [])] * 3]),
    "one tiny high-priority pod lifts its gang over a priority-500 gang": (shape(
        CrossedSpec("g0", 4, 4, 2, tiny=True),
        CrossedSpec("g1", 5, 5, 4, queue="c", priority="mid")),
        [([], []), ([BIND] * 6, []), ([], [])]),
    "a running gang's extra pod that fits nowhere is handed out as a bind of nothing": (shape(
        CrossedSpec("g0", 1, 1, 1, lone=True, priority="high", claim="template", gpus=4),
        CrossedSpec("g1", 1, 2, 1, queue="z", priority="high", tiny=True, claim="template")),
        [([], []), ([BIND] * 2, []), ([], [])]),
    "a claim allocated for a pod whose bind was refused counts against its queue's cap": (
        shape(CrossedSpec("g0", 1, 2, 1, lone=True, queue="c", priority="high",
                          claim="template", gpus=2, device_class=ANY),
              CrossedSpec("g1", 1, 1, 1, queue="a", priority="high"),
              caps={"c": {CPU: "1", f"{DEVICE_CLASS_PREFIX}{ANY}": "2"}}),
        [([], []), ([("refuse", 0)], []), ([], [])]),
    "native CompositePodGroups keep their children in racks as members come and go": (shape(
        CrossedSpec("g0", 2, 2, 1, queue="a", level="required", sub="racks", native=True),
        CrossedSpec("g1", 3, 4, 1, queue="c", sub="racks", native=True, claim="template")),
        [([], []), ([BIND] * 4, []), ([("terminate", 0)], []), ([("gone", 0)], []),
         ([("again", 0)], []), ([BIND] * 2, []), ([], [])]),
}
"""Shapes the scheduler was seen to break promises in, tried before the random ones."""


def seen(test: Any) -> Any:
    for (specs, queue_objects), steps in SEEN.values():
        test = example(specs=specs, queue_objects=queue_objects, steps=steps)(test)
    return test


EVENTS = st.lists(
    st.tuples(st.sampled_from(["bind", "bind", "bind", "refuse", "lose", "terminate",
                               "terminate", "gone", "gone", "again", "again", "close", "open",
                               "pool", "launch", "kueue"]),
              st.integers(0, 20)),
    max_size=8,
)
FATES = st.lists(st.sampled_from(["ok", "ok", "ok", "refuse", "lose"]), max_size=4)


@settings(max_examples=250, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@seen
@given(specs=crossed_specs(), queue_objects=queues(),
       steps=st.lists(st.tuples(EVENTS, FATES), min_size=3, max_size=12))
def test_every_policy_keeps_its_promises_with_devices_lone_pods_and_queues_crossed(
    specs: dict[str, CrossedSpec], queue_objects: list[dict[str, Any]],
    steps: list[tuple[list[tuple[str, int]], list[str]]],
) -> None:
    world = CrossedWorld(Mirror(scheduler_names=frozenset({"gang"})), dict(specs))
    feed = world.feed
    nodes = [node(name, 2 if name == "n3" else 4) for name in GPUS]
    for body in nodes:
        block, rack = RACKS[body["metadata"]["name"]]
        body["metadata"]["labels"].update({BLOCK: block, RACK: rack})
    feed.replace("nodes", nodes)
    feed.upsert("topologies", {"metadata": {"name": "fabric"}, "spec": {
        "levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]}})
    feed.replace("resourceslices", [
        fakedriver.slice_manifest(name, index, per_node=count,
                                  model=fakedriver.GpuModel(model))
        for index, (name, (model, count)) in enumerate(GPUS.items()) if count])
    feed.replace("deviceclasses", [device_class(name) for name in CLASSES])
    for body in queue_objects:
        world.queues[body["metadata"]["name"]] = body
        feed.upsert_queue(body)
    for spec in specs.values():
        if spec.native:
            composite, *children = composite_of(spec)
            feed.upsert("compositepodgroups", composite)
            for body in children:
                feed.upsert_group(Flavor.NATIVE, body)
        elif not spec.lone:
            body = group(spec.name, spec.min_member)
            body["spec"]["queue"] = spec.queue
            if spec.runtime is not None:
                body["metadata"]["annotations"] = {RUNTIME_ANNOTATION: f"{spec.runtime}s"}
            topology = topology_of(spec)
            if topology is not None:
                body["spec"]["topology"] = topology
            if spec.kueue:
                body["spec"]["minResources"] = {CPU: f"{spec.pods * spec.cores * 500}m"}
                body["metadata"]["ownerReferences"] = [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": spec.name,
                     "uid": f"job-{spec.name}"}]
                world.kueue_admitted[spec.name] = False
                feed.upsert("kueueworkloads", kueue_workload(spec.name, admitted=False))
            feed.upsert_group(Flavor.GANGSCHED, body)
        if spec.claim == "shared":
            world.put_claim(claim(f"{spec.name}-shared", spec))
        for index in range(spec.pods):
            _create(world, spec, index)
    for events, fates in steps:
        world.now += 1.0
        world.fates = list(fates)
        _victims_go(world)
        for kind, index in events:
            _crossed_happen(world, kind, index)
            _resource_claim_controller(world)
        for key in world.mirror.expire(world.now, ASSUME_TTL_S):
            world.lost.discard(key)
        _crossed_step(world)


def _crossed_happen(world: CrossedWorld, kind: str, index: int) -> None:
    """A queue closes or opens again, Karpenter's NodePool changes or launches a node, Kueue
    admits a job or takes its admission back, or what happens in the world of plain gangs."""
    if kind in ("pool", "launch"):
        _karpenter(world, kind, index)
        return
    if kind == "kueue":
        if world.kueue_admitted:
            name = sorted(world.kueue_admitted)[index % len(world.kueue_admitted)]
            world.kueue_admitted[name] = admitted = not world.kueue_admitted[name]
            world.feed.upsert("kueueworkloads", kueue_workload(name, admitted))
        return
    if kind not in ("close", "open"):
        _happen(world, kind, index)
        return
    body = world.queues[sorted(world.queues)[index % len(world.queues)]]
    body["spec"]["state"] = "Closed" if kind == "close" else "Open"
    world.feed.upsert_queue(body)


def _karpenter(world: CrossedWorld, kind: str, index: int) -> None:
    """The NodePool appears or its cpu limit changes; or it launches a 4-cpu node, which
    its status counts against the limit."""
    if kind == "pool":
        limit = POOL_CPU[index % len(POOL_CPU)]
        used = (world.nodepool or {}).get("status", {"resources": {"cpu": "0"}})
        world.nodepool = {"metadata": {"name": "burst"}, "status": used, "spec": {
            "template": {"spec": {}}, **({} if limit is None else {"limits": {"cpu": limit}})}}
    elif world.nodepool is not None:
        body = node(f"k{world.launched}", 4)
        body["metadata"]["labels"].update({BLOCK: LAUNCHED[0], RACK: LAUNCHED[1],
                                           MADE_BY_NODEPOOL: "burst"})
        body["metadata"]["creationTimestamp"] = datetime.fromtimestamp(
            world.now, UTC).isoformat()
        world.launched += 1
        world.feed.upsert("nodes", body)
        world.nodepool["status"] = {"resources": {"cpu": str(4 * world.launched)}}
    if world.nodepool is not None:
        world.feed.upsert("nodepools", world.nodepool)


def _resource_claim_controller(world: CrossedWorld) -> None:
    """A pod's own claim goes with the pod; a consumer gone leaves ``reservedFor``, and a
    claim left with none is deallocated."""
    live = {raw["metadata"]["uid"] for raw in world.raw.values()}
    for key, raw in list(world.claims.items()):
        owners = [o["uid"] for o in raw["metadata"].get("ownerReferences", ())]
        if owners and owners[0] not in live:
            del world.claims[key]
            world.feed.delete("resourceclaims", raw)
            continue
        status = raw["status"]
        reserved = status.get("reservedFor", [])
        kept = [entry for entry in reserved if entry["uid"] in live]
        if kept != reserved:
            status["reservedFor"] = kept
            if not kept:
                status.pop("allocation", None)
            world.put_claim(raw)


def _write_claim(world: CrossedWorld, write: ClaimWrite) -> bool:
    """Send one claim write as the API server would take it; whether the shell is told it
    was written (a lost write is applied, but its call failed)."""
    fate = world.fates.pop(0) if world.fates else "ok"
    raw = world.claims.get(write.claim)
    assert write.create is None, "no pod here asks devices as an extended resource"
    if fate == "refuse" or raw is None or raw["metadata"]["uid"] != write.uid:
        return False
    status = raw["status"]
    if write.allocation is not None:
        if raw["metadata"]["resourceVersion"] != write.resource_version or status.get(
                "allocation"):
            return False  # 409: someone allocated it meanwhile
        status["allocation"] = allocation_to_api(write.allocation)
    elif not status.get("allocation"):
        return False  # 422: reservedFor needs an allocation
    reserved = status.setdefault("reservedFor", [])
    known = {entry["uid"] for entry in reserved}
    reserved.extend({"resource": c.resource, "name": c.name, "uid": c.uid}
                    for c in write.consumers if c.uid not in known)
    world.put_claim(raw)
    return fate != "lose"


def _undo_claim(world: CrossedWorld, write: ClaimWrite) -> None:
    raw = world.claims.get(write.claim)
    if raw is None:
        return
    status = raw["status"]
    gone = {c.uid for c in write.consumers}
    status["reservedFor"] = [e for e in status.get("reservedFor", []) if e["uid"] not in gone]
    if write.allocation is not None:
        status.pop("allocation", None)
    world.put_claim(raw)


def _hand_out(world: CrossedWorld, placement: Placement) -> bool:
    """Assume the gang, write its claims, queue its binds, as the actuator does; whether
    its claims were all written."""
    world.mirror.assume(placement, world.now)
    told = [(write, _write_claim(world, write)) for write in placement.claims]
    if all(accepted for _, accepted in told):
        world.queued.extend(placement.assignments)
        return True
    for write, accepted in told:
        if accepted:
            _undo_claim(world, write)
    world.mirror.forget_claims(tuple(w.claim for w in placement.claims))
    for pod, _ in placement.assignments:
        world.mirror.forget(pod)
        world.state = bind_refused(world.state, pod, now=world.now, status=409,
                                   message="claim not written")
    return False


def _evict(world: CrossedWorld, action: Evict) -> None:
    """Evict every victim pod (they terminate, and go later), noting who evicted whom."""
    preemption = action.preemption
    pods = {key: (raw["metadata"]["uid"], world.mirror.is_placed(key),
                  "deletionTimestamp" in raw["metadata"]) for key, raw in world.raw.items()}
    if preemption.reclaim_for is None:
        _check_outranks(world, preemption.preemptor, preemption.victims)
    eviction = Eviction(world.steps, preemption.reclaim_for is not None, preemption.preemptor,
                        frozenset(preemption.victims), pods, _queue_states(world))
    _check_no_loop(world, eviction)
    world.evictions.append(eviction)
    for keys in action.victim_pods.values():
        for key in keys:
            raw = world.raw.get(key)
            if raw is not None and raw["spec"].get("nodeName"):
                raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
                world.feed.upsert("pods", raw)
                world.evicted.append(key)


def _victims_go(world: CrossedWorld) -> None:
    """Evicted pods end within a step (their controller creates them again later)."""
    for key in world.evicted:
        raw = world.raw.get(key)
        if raw is not None and "deletionTimestamp" in raw["metadata"]:
            world.feed.delete("pods", world.raw.pop(key))
    world.evicted.clear()
    _resource_claim_controller(world)


def _queue_states(world: CrossedWorld) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, body["spec"]["state"]) for name, body in world.queues.items()))


def _crossed_step(world: CrossedWorld) -> None:
    mirror = world.mirror
    before = mirror.view()
    gangs = {gang.key: gang for gang in _gangs(world)}
    devices_before = _free_devices(world)
    preempting = set(world.state.preempting)
    pools = tuple(mirror.budgets_and_storage.nodepools.values())
    asked_before = world.state.asked
    coming = nodes_coming(asked_before, list(gangs.values()), before.snapshot, world.now,
                          CONFIG.asking) if pools else {}
    waiting_since = dict(world.state.waiting_since)
    stepped = step(world.state, StepView(before, nodepools=pools), world.now, CONFIG)
    world.state = stepped.state
    _check_asking(world, stepped, pools, asked_before)
    world.steps += 1
    for action in stepped.actions:
        if isinstance(action, Evict):
            _evict(world, action)
    binds = [a.placement for a in stepped.actions if isinstance(a, Bind)]
    _check_whole(world, binds)
    _check_made_for(coming, binds)
    _check_one_rack(world, binds)
    _check_patient(world, binds, waiting_since)
    _check_sub_groups(world, before.members, binds)
    kept = [placement for placement in binds if _hand_out(world, placement)]
    _check_rooms(world)
    _check_devices(world)
    _check_caps(world)
    starving = [(u.gang, u.reason) for u in stepped.result.unplaceable
                if isinstance(u.reason, Starving)]
    for key, reason in starving:
        if key in gangs:
            _check_starving_kept(world, gangs, gangs[key], reason, kept, preempting)
    _check_replacements_kept(world, before.snapshot, devices_before, kept)
    _check_kueue_decides(world, stepped.actions, stepped.result)


# ---------------------------------------------------------------- what is checked


def _check_kueue_decides(world: CrossedWorld, actions: Any, result: Any) -> None:
    """A gang whose Kueue Workload is not admitted is not bound, admitted, starving nor a
    preemptor, and says it waits for Kueue."""
    waiting = {GangKey(f"{NAMESPACE}/{name}") for name, admitted in world.kueue_admitted.items()
               if not admitted}
    for action in actions:
        assert not (isinstance(action, Bind) and action.placement.gang in waiting), (
            f"{action} handed out a gang Kueue has not admitted")
        assert not (isinstance(action, Evict) and action.preemption.preemptor in waiting), (
            f"{action} evicts for a gang Kueue has not admitted")
    assert not waiting & world.state.admitted, (
        f"admitted before Kueue: {sorted(waiting & world.state.admitted)}")
    for told in (*result.unplaceable, *result.unadmitted):
        if told.gang in waiting:
            assert isinstance(told.reason, SuspendedByKueue), (told.gang, told.reason)


def _placed_members(world: CrossedWorld, gang: GangKey) -> list[PodKey]:
    return [key for key, raw in world.raw.items()
            if world.spec_of(key).gang_of(key) == gang and world.mirror.is_placed(key)
            and "deletionTimestamp" not in raw["metadata"]]


def _check_whole(world: CrossedWorld, binds: list[Placement]) -> None:
    """A gang is handed out whole: with what of it is bound or assumed, minMember; and a
    bind binds some pod."""
    for placement in binds:
        assert placement.assignments, f"{placement.gang} handed out with no pod"
        spec = world.spec_of(placement.assignments[0][0])
        held = _placed_members(world, placement.gang)
        assert len(held) + len(placement.assignments) >= spec.min_member, (
            f"{placement.gang} handed out below minMember: {placement.assignments}, had {held}")


def _check_one_rack(world: CrossedWorld, binds: list[Placement]) -> None:
    """A gang requiring a rack is handed out in the rack of its placed members, one rack."""
    nodes = {member.pod.key: member.pod.node_name for member in world.mirror.view().members}
    for placement in binds:
        if not placement.assignments:
            continue
        if world.spec_of(placement.assignments[0][0]).level != "required":
            continue
        held = {nodes[key] for key in _placed_members(world, placement.gang) if key in nodes}
        racks = {RACKS.get(str(name), LAUNCHED)[1]
                 for name in held | {n for _, n in placement.assignments} if name is not None}
        assert len(racks) == 1, f"{placement.gang} requires one rack, placed in {racks}"


def _check_patient(world: CrossedWorld, binds: list[Placement],
                   waiting_since: dict[GangKey, float]) -> None:
    """A gang patient for a rack is handed out in a wider level only once it has waited
    its ``preferredWaitSeconds``."""
    for placement in binds:
        if not placement.assignments:
            continue
        spec = world.spec_of(placement.assignments[0][0])
        if spec.lone or spec.native or spec.level != "patient":
            continue
        if placement.level is not None and placement.level.level == RACK:
            continue
        since = waiting_since.get(placement.gang)
        assert since is not None and world.now - since >= PATIENT_S, (
            f"{placement.gang} taken across racks after waiting since {since}, now {world.now}")


def _check_sub_groups(world: CrossedWorld, members: Iterable[Member],
                      binds: list[Placement]) -> None:
    """Each sub-group of a gang handed out is in one rack, its placed members' rack; a gang
    with a pending pod naming a sub-group its PodGroup does not list is not handed out."""
    nodes = {member.pod.key: member.pod.node_name for member in world.mirror.view().members}
    unknown = {world.spec_of(member.pod.key).gang_of(member.pod.key) for member in members
               if member.pod.node_name is None and not member.pod.terminating
               and member.pod.sub_group == "nope"}
    for placement in binds:
        assert placement.gang not in unknown, (
            f"{placement.gang} handed out with a pod naming an unknown sub-group")
        if not placement.assignments:
            continue
        spec = world.spec_of(placement.assignments[0][0])
        if spec.sub != "racks":
            continue
        placed = [(key, nodes.get(key)) for key in _placed_members(world, placement.gang)]
        for sub in range(2):
            racks = {RACKS[str(name)][1]
                     for key, name in (*placed, *placement.assignments)
                     if name is not None and int(key.rsplit("-", 1)[1]) % 2 == sub}
            assert len(racks) <= 1, f"{placement.gang} sub-group s{sub} placed in {racks}"


def _check_made_for(coming: dict[GangKey, Coming], binds: list[Placement]) -> None:
    """A node Karpenter made for a gang still asking takes no other gang's pod."""
    owner = {name: gang for gang, came in coming.items() for name in came.nodes}
    for placement in binds:
        for pod, name in placement.assignments:
            assert owner.get(name, placement.gang) == placement.gang, (
                f"{pod} of {placement.gang} on {name}, made for {owner[name]}")


def _check_asking(world: CrossedWorld, stepped: Stepped, pools: tuple[NodePool, ...],
                  asked_before: Mapping[GangKey, Asked]) -> None:
    """A waiting pod says ``Unschedulable`` exactly when its gang's reported reason (the one
    it shows) wants room, so the condition changes only with it; the gangs starting to
    ask a NodePool with a limit fit it together (those asking already go on: the limit
    counts the nodes launched for them)."""
    reported = stepped.state.reported
    for action in stepped.actions:
        if not isinstance(action, MarkUnschedulable) or action.gated:
            continue
        said = reported.get(world.spec_of(action.pod).gang_of(action.pod))
        if said is None:
            continue  # its PodGroup is missing or invalid: it never asks
        assert action.asks_for_nodes == wants_room(said.reason), (
            f"{action.pod} asks {action.asks_for_nodes}: {said}")
        assert not pools or not isinstance(said.reason, NodePoolLimit | AskingPaused) or (
            not action.asks_for_nodes)
    if pools and pools[0].headroom is not None:
        pending = {gang.key: gang.pending for gang in stepped.gathered.gangs}
        asking = [key for key, asked in stepped.state.asked.items()
                  if asked.paused_until is None and key not in asked_before]
        need = Resources.sum(pod.requests for key in asking for pod in pending.get(key, ()))
        assert pools[0].holds(need), f"{asking} ask {need}, more than {pools[0].headroom}"


def _results(raw: dict[str, Any]) -> list[dict[str, Any]]:
    allocation = raw["status"].get("allocation") or {}
    results: list[dict[str, Any]] = allocation.get("devices", {}).get("results", [])
    return results


def _check_devices(world: CrossedWorld) -> None:
    """No device on two claims, admin access aside."""
    holders: dict[tuple[str, str], list[str]] = {}
    for key, raw in world.claims.items():
        for result in _results(raw):
            if not result.get("adminAccess"):
                holders.setdefault((result["pool"], result["device"]), []).append(key)
    for device, claims in holders.items():
        assert len(claims) == 1, f"device {device} allocated to {claims}"


def _free_devices(world: CrossedWorld) -> Counter[tuple[str, str]]:
    """Free devices per (node, DeviceClass), as the API server's claims say."""
    taken = {(r["pool"], r["device"]) for raw in world.claims.values() for r in _results(raw)
             if not r.get("adminAccess")}
    free: Counter[tuple[str, str]] = Counter()
    for name, (model, count) in GPUS.items():
        for index in range(count):
            if (name, f"gpu-{index}") not in taken:
                free[(name, ANY)] += 1
                free[(name, H100)] += model == "H100"
    return free


def _check_caps(world: CrossedWorld) -> None:
    """No queue's subtree holds more than its capability, devices and lone pods counted,
    whatever queue is Closed."""
    held: dict[str, Counter[str]] = {name: Counter() for name in QUEUES}
    counted: set[str] = set()
    for key, raw in world.raw.items():
        if not world.mirror.is_placed(key) or "deletionTimestamp" in raw["metadata"]:
            continue
        spec = world.spec_of(key)
        usage = held[spec.queue]
        usage[CPU] += Resources.parse(raw["spec"]["containers"][0]["resources"]["requests"]
                                      ).get(CPU)
        for entry in raw["status"].get("resourceClaimStatuses", ()) or [
                {"resourceClaimName": c.get("resourceClaimName")}
                for c in raw["spec"].get("resourceClaims", ())]:
            claim_key = f"{NAMESPACE}/{entry['resourceClaimName']}"
            if claim_key in counted or claim_key not in world.claims:
                continue
            counted.add(claim_key)
            body = world.claims[claim_key]
            class_of = {r["name"]: r["exactly"]["deviceClassName"]
                        for r in body["spec"]["devices"]["requests"]}
            for result in _results(body):
                if result.get("adminAccess"):
                    continue
                name = class_of[result["request"]]
                usage[f"{DEVICE_CLASS_PREFIX}{name}"] += 1
                if CLASSES[name]:
                    usage[str(CLASSES[name])] += 1
    for name, body in world.queues.items():
        capability = body["spec"].get("capability")
        if not capability:
            continue
        below = [q for q in QUEUES if name in _path(q)]
        total = sum((held[q] for q in below), Counter())
        for resource, limit in capability.items():
            cap = Resources.parse({resource: limit}).get(resource)
            assert total[resource] <= cap, (
                f"queue {name} holds {resource}={total[resource]} over its cap {limit} "
                f"({ {q: dict(held[q]) for q in below} })")


def _path(name: str) -> list[str]:
    """The queue and its ancestors."""
    path = [name]
    while (parent := QUEUES[path[-1]]) is not None:
        path.append(parent)
    return path


def _node_free(world: CrossedWorld, name: NodeName) -> Resources:
    usage = world.mirror.view().snapshot.nodes[name]
    return usage.node.allocatable - usage.requested


def _cluster_free(world: CrossedWorld) -> Resources:
    return Resources.sum(_node_free(world, name) for name in world.mirror.view().snapshot.nodes)


def _devices_taken(placement: Placement) -> Counter[tuple[str, str]]:
    """Devices the placement allocated, per (node, DeviceClass) they count under."""
    taken: Counter[tuple[str, str]] = Counter()
    for write in placement.claims:
        if write.allocation is None:
            continue
        for device in write.allocation.devices:
            if not device.admin_access:
                taken[(device.device.pool, ANY)] += 1
                taken[(device.device.pool, H100)] += GPUS[device.device.pool][0] == "H100"
    return taken


def _check_starving_kept(
    world: CrossedWorld, gangs: dict[GangKey, Gang], starving: Gang, reason: Starving,
    kept: list[Placement], preempting: set[GangKey],
) -> None:
    """No gang after the starving gang in its queue's order is placed unless the cluster
    keeps free what the starving gang's pods need, devices included, nor takes on a node
    kept for it room or devices one of its pods needs (a gang that ends before its
    reservation aside).

    The order across queues depends on shares; inside a queue it is priority, then
    age, and gangs that run or preempt go first: only gangs surely after it are asked."""
    spec = world.spec_of(starving.pending[0].key)
    lacking = max(0, starving.min_member - starving.bound)
    devices = sum(sorted(spec.devices_of(pod.key) for pod in starving.pending)[:lacking])
    for placement in kept:
        other = gangs.get(placement.gang)
        if (other is None or other.key == starving.key or other.queue != starving.queue
                or other.bound > 0 or other.key in preempting
                or gang_order(other) <= gang_order(starving)
                or backfills(other, world.now, reason.at)):
            continue
        free = _cluster_free(world)
        # Node room for what nodes list; the devices it holds are checked below.
        listed = set(world.mirror.view().snapshot.index.schedulable_total.names())
        room = Resources.of({name: n for name, n in reason.hold.items() if name in listed})
        assert room.fits(free), (
            f"{placement.gang} placed after starving {starving.key}, which holds "
            f"{reason.hold}: {free} left")
        # Devices its own members or others still hold are not free to keep: only a
        # placement that takes devices of the class can leave too few.
        taken = _devices_taken(placement)
        took = sum(n for (_, cls), n in taken.items() if cls == spec.device_class)
        left = sum(n for (_, cls), n in _free_devices(world).items() if cls == spec.device_class)
        assert not (took and left < devices), (
            f"{placement.gang} placed after starving {starving.key}, whose pods need {devices} "
            f"{spec.device_class} devices: {left} left")
        for pod, name in placement.assignments:
            if name not in reason.nodes:
                continue
            requests = next(p.requests for p in other.pending if p.key == pod)
            free = _node_free(world, name)
            for resource, amount in requests.items():
                need = min(p.requests.get(resource) for p in starving.pending)
                assert not (amount > 0 and free.get(resource) < need), (
                    f"{placement.gang} took {resource} on {name}, kept for starving "
                    f"{starving.key}: {free.get(resource)} left, its pods need {need}")
            need = min(spec.devices_of(p.key) for p in starving.pending)
            left = _free_devices(world)[(name, spec.device_class)]
            assert not (need and taken[(name, spec.device_class)] and left < need), (
                f"{placement.gang} took {spec.device_class} devices on {name}, kept for "
                f"starving {starving.key}: {left} left, its pods need {need}")


def _check_replacements_kept(
    world: CrossedWorld, before: Any, devices_before: Counter[tuple[str, str]],
    kept: list[Placement],
) -> None:
    """The room of the members a running gang lost, devices included, all free on their node
    when the step began, is still free after it unless its own gang took it.

    A member gone takes its claim with it, and its replacement needs devices anew; one
    still there (terminating, or its bind lost) keeps its devices through its claim."""
    placed = {placement.gang for placement in kept}
    need: dict[NodeName, Resources] = {}
    devices: dict[NodeName, Counter[str]] = {}
    holders: dict[NodeName, set[GangKey]] = {}
    for hold in world.state.holds:
        name = hold.pod.node_name
        if hold.gang in placed or name is None:
            continue
        need[name] = need.get(name, Resources.zero()) + hold.pod.requests
        spec = world.spec_of(hold.pod.key)
        gone = all(raw["metadata"]["uid"] != hold.pod.uid for raw in world.raw.values())
        devices.setdefault(name, Counter())[spec.device_class] += (
            spec.devices_of(hold.pod.key) if gone else 0)
        holders.setdefault(name, set()).add(hold.gang)
    for placement in kept:
        taken = _devices_taken(placement)
        for _, name in placement.assignments:
            if name not in need or placement.gang in holders[name]:
                continue
            usage = before.nodes[name]
            if not need[name].fits(usage.node.allocatable - usage.requested) or any(
                    devices_before[(name, cls)] < count for cls, count in devices[name].items()):
                continue  # not all of it was free: it may be held elsewhere
            assert need[name].fits(_node_free(world, name)), (
                f"{placement.gang} took the room on {name} held for a replacement in "
                f"{sorted(holders[name])}")
            for cls, count in devices[name].items():
                left = _free_devices(world)[(name, cls)]
                assert not (count and taken[(name, cls)] and left < count), (
                    f"{placement.gang} took {cls} devices on {name} held for a replacement "
                    f"in {sorted(holders[name])}: {left} left, it needs {count}")


def _lowest_priority(world: CrossedWorld, gang: GangKey) -> int | None:
    """A gang's priority: its lowest member's (one member never lifts it)."""
    return min((raw["spec"]["priority"] for key, raw in world.raw.items()
                if world.spec_of(key).gang_of(key) == gang
                and "deletionTimestamp" not in raw["metadata"]), default=None)


def _check_outranks(world: CrossedWorld, preemptor: GangKey, victims: tuple[GangKey, ...]
                    ) -> None:
    """Priority preemption evicts only gangs of lower priority than the preemptor's."""
    mine = _lowest_priority(world, preemptor)
    for victim in victims:
        theirs = _lowest_priority(world, victim)
        assert mine is None or theirs is None or theirs < mine, (
            f"{preemptor} (priority {mine}, its lowest member's) preempts {victim} "
            f"(priority {theirs})")


def _check_no_loop(world: CrossedWorld, now: Eviction) -> None:
    """A gang evicted by reclaim (or by priority) does not evict, by the other, the gang it
    was evicted for, when nothing but these gangs changed in between."""
    for then in world.evictions:
        if then.reclaim == now.reclaim or now.preemptor not in then.victims:
            continue
        if then.preemptor not in now.victims:
            continue
        involved = then.victims | now.victims | {then.preemptor, now.preemptor}

        def others(pods: dict[PodKey, tuple[str, bool, bool]],
                   involved: frozenset[GangKey] = involved) -> dict[PodKey, Any]:
            return {key: value for key, value in pods.items()
                    if world.spec_of(key).gang_of(key) not in involved}

        if others(then.pods) == others(now.pods) and then.queues == now.queues:
            first, second = ("reclaim", "preemption") if then.reclaim else (
                "preemption", "reclaim")
            raise AssertionError(
                f"{then.preemptor} evicted {now.preemptor} by {first} at step {then.at}, "
                f"and {now.preemptor} evicts it back by {second} at step {now.at}")
