"""API objects to model objects: effective requests, rules, and only ObjectError for junk."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.core.kubeobjects.fields import ObjectError
from gangsched.core.kubeobjects.nodes import node_from_api
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.kubeobjects.queues import (
    FieldProblem,
    PriorityClass,
    WorkloadQueue,
    priority_class_from_api,
    queue_from_api,
    workload_queue_from_api,
)
from gangsched.core.kubeobjects.records import pod_header, pod_record_from_api
from gangsched.core.model.objects import GangKey, QueueName, SelectorRequirement, Taint, Toleration
from gangsched.core.model.resources import Resources


def container(name: str, **requests: str) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "resources": {"requests": dict(requests)}}


def api_pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "x",
            "namespace": "default",
            "creationTimestamp": "2024-05-01T12:00:00Z",
        },
        "spec": {"containers": [container("main", cpu="1", memory="1Gi")], **spec},
        "status": {"phase": "Pending"},
    }


def requests(**amounts: str | int) -> Resources:
    return Resources.parse({**amounts, "pods": 1})


def test_sum_of_containers_plus_one_pod() -> None:
    obj = api_pod(containers=[container("a", cpu="1", memory="1Gi"),
                              container("b", cpu="500m", memory="512Mi")])
    assert pod_from_api(obj).requests == requests(cpu="1500m", memory="1536Mi")


def test_init_containers_take_the_max_not_the_sum() -> None:
    obj = api_pod(
        containers=[container("main", cpu="1", memory="1Gi")],
        initContainers=[container("i1", cpu="2", memory="256Mi"),
                        container("i2", cpu="500m", memory="2Gi")],
    )
    assert pod_from_api(obj).requests == requests(cpu="2", memory="2Gi")


def test_sidecars_add_to_the_pod_and_to_later_init_containers() -> None:
    sidecar = {**container("proxy", cpu="500m", memory="128Mi"), "restartPolicy": "Always"}
    obj = api_pod(
        containers=[container("main", cpu="1", memory="1Gi")],
        initContainers=[
            container("before", cpu="1200m"),  # runs before the sidecar starts
            sidecar,
            container("after", cpu="1", memory="2Gi"),  # runs beside the sidecar
        ],
    )
    # regular + sidecar = 1500m/1152Mi; "after" + sidecar = 1500m/2176Mi; "before" = 1200m
    assert pod_from_api(obj).requests == requests(cpu="1500m", memory="2176Mi")


def test_sidecar_only_counts_from_its_position() -> None:
    sidecar = {**container("proxy", cpu="1"), "restartPolicy": "Always"}
    obj = api_pod(
        containers=[container("main", cpu="1")],
        initContainers=[container("big", cpu="3"), sidecar],
    )
    assert pod_from_api(obj).requests.get("cpu") == 3000


def test_overhead_is_added_on_top() -> None:
    obj = api_pod(overhead={"cpu": "250m", "memory": "120Mi"})
    assert pod_from_api(obj).requests == requests(cpu="1250m", memory="1144Mi")


def test_limits_stand_in_for_missing_requests() -> None:
    main = {"name": "main", "resources": {"limits": {"cpu": "2", "nvidia.com/gpu": "1"},
                                          "requests": {"cpu": "1"}}}
    obj = api_pod(containers=[main])
    assert pod_from_api(obj).requests == Resources.parse(
        {"cpu": "1", "nvidia.com/gpu": 1, "pods": 1}
    )


def test_pod_level_requests_replace_cpu_and_memory() -> None:
    obj = api_pod(resources={"requests": {"cpu": "3", "memory": "4Gi"}},
                  containers=[{**container("main", cpu="1", memory="1Gi")}])
    assert pod_from_api(obj).requests == requests(cpu="3", memory="4Gi")


def test_pod_level_hugepages_replace_the_containers_and_count_alone() -> None:
    """A pod asking for huge pages at pod level only needs them on the node; one naming
    them at pod level replaces what its containers ask, as for cpu and memory."""
    alone = api_pod(resources={"requests": {"hugepages-2Mi": "1Gi"}},
                    containers=[container("main", cpu="1")])
    assert pod_from_api(alone).requests.get("hugepages-2Mi") == 2**30
    assert pod_from_api(alone).requests.get("cpu") == 1000
    replaced = api_pod(resources={"requests": {"hugepages-1Gi": "2Gi"}},
                       containers=[container("main", cpu="1", **{"hugepages-1Gi": "1Gi"})])
    assert pod_from_api(replaced).requests.get("hugepages-1Gi") == 2 * 2**30
    assert pod_from_api(replaced).requests.get("cpu") == 1000


def test_resized_container_counts_at_the_larger_size() -> None:
    obj = api_pod()
    obj["status"]["containerStatuses"] = [
        {"name": "main", "resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}
    ]
    assert pod_from_api(obj).requests == requests(cpu="2", memory="1Gi")
    obj["status"]["resize"] = "Infeasible"
    assert pod_from_api(obj).requests == requests(cpu="2", memory="512Mi")


def test_rules_and_metadata() -> None:
    obj = api_pod(
        nodeSelector={"zone": "a"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                     {"key": "k", "value": "v"}],
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
            ]}}},
        priority=1000,
        nodeName="n1",
    )
    p = pod_from_api(obj)
    assert p.key == "default/x"
    assert p.rules.node_selector == (("zone", "a"),)
    assert p.rules.tolerations == (Toleration("gpu", "Exists", "", "NoSchedule"),
                                   Toleration("k", "Equal", "v", ""))
    terms = p.rules.required_affinity
    assert terms[0].match_expressions == (SelectorRequirement("gpu", "In", ("a100",)),)
    assert terms[1].match_fields == (SelectorRequirement("metadata.name", "In", ("n1",)),)
    assert p.priority == 1000
    assert p.node_name == "n1"
    assert p.created == 1714564800.0
    assert p.gang is None
    assert not p.terminal


@pytest.mark.parametrize(("phase", "terminal"),
                         [("Succeeded", True), ("Failed", True), ("Running", False)])
def test_terminal_phases(phase: str, terminal: bool) -> None:
    obj = api_pod()
    obj["status"]["phase"] = phase
    assert pod_from_api(obj).terminal is terminal


def test_error_names_object_container_and_field() -> None:
    obj = api_pod(containers=[container("main", memory="12Gb")])
    with pytest.raises(ObjectError) as err:
        pod_from_api(obj)
    assert str(err.value) == (
        "pod default/x: container 'main' requests memory '12Gb': not a quantity"
    )


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda o: o["spec"].update(containers="x"), "spec.containers must be a list"),
        (lambda o: o["spec"].update(priority="high"), "spec.priority"),
        (lambda o: o["spec"].update(tolerations=[{"key": 3}]), "spec.tolerations[0].key"),
        (lambda o: o["metadata"].update(creationTimestamp="yesterday"), "creationTimestamp"),
        (lambda o: o["spec"].update(overhead={"cpu": "-1"}), "spec.overhead cpu"),
        (lambda o: o["spec"].update(affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}),
         "must not be empty"),
        (lambda o: o["spec"].update(affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}}),
         "not a selector operator"),
        (lambda o: o.update(metadata={}), "metadata.name"),
    ],
)
def test_malformed_pods_raise_object_error(mutate: Any, fragment: str) -> None:
    obj = api_pod()
    mutate(obj)
    with pytest.raises(ObjectError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
        pod_from_api(obj)


def api_node(**status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n1", "labels": {"zone": "a", "gpu": "a100"}},
        "spec": {"taints": [{"key": "gpu", "value": "busy", "effect": "NoSchedule"},
                            {"key": "dedicated", "effect": "NoExecute"}]},
        "status": {
            "allocatable": {"cpu": "3900m", "memory": "15Gi", "pods": "110",
                            "nvidia.com/gpu": "8"},
            "conditions": [{"type": "MemoryPressure", "status": "False"},
                           {"type": "Ready", "status": "True"}],
            **status,
        },
    }


def test_node_from_api() -> None:
    n = node_from_api(api_node())
    assert n.name == "n1"
    assert n.allocatable == Resources.parse(
        {"cpu": "3900m", "memory": "15Gi", "pods": 110, "nvidia.com/gpu": 8}
    )
    assert n.labels == (("gpu", "a100"), ("zone", "a"))
    assert n.taints == (Taint("gpu", "busy", "NoSchedule"), Taint("dedicated", "", "NoExecute"))
    assert n.ready and not n.unschedulable


def test_node_flags() -> None:
    cordoned = api_node()
    cordoned["spec"]["unschedulable"] = True
    assert node_from_api(cordoned).unschedulable
    assert not node_from_api(api_node(conditions=[{"type": "Ready", "status": "False"}])).ready
    assert not node_from_api(api_node(conditions=[])).ready
    bad = api_node()
    bad["spec"]["unschedulable"] = "yes"
    with pytest.raises(ObjectError, match=r"node n1: spec\.unschedulable"):
        node_from_api(bad)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)
KEY_PATHS = [
    ("metadata",), ("metadata", "name"), ("metadata", "namespace"),
    ("metadata", "creationTimestamp"), ("spec",), ("spec", "containers"),
    ("spec", "initContainers"), ("spec", "overhead"), ("spec", "nodeSelector"),
    ("spec", "affinity"), ("spec", "tolerations"), ("spec", "priority"), ("spec", "nodeName"),
    ("spec", "resources"), ("status",), ("status", "phase"), ("status", "containerStatuses"),
    ("status", "conditions"), ("spec", "taints"), ("spec", "unschedulable"),
    ("status", "allocatable"), ("metadata", "labels"),
]


def _graft(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    cursor: Any = out
    for key in path[:-1]:
        if not isinstance(cursor.get(key), dict):
            cursor[key] = {}
        cursor = cursor[key]
    cursor[path[-1]] = value
    return out


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(KEY_PATHS), json_values), max_size=4))
def test_junk_in_any_field_only_ever_raises_object_error(grafts: list[Any]) -> None:
    for base, convert in ((api_pod(), pod_from_api), (api_node(), node_from_api),
                          (api_pod(), _record)):
        obj = base
        for path, value in grafts:
            obj = _graft(obj, path, value)
        pod_header(obj)  # never fails: a broken pod is still named and reported on
        with contextlib.suppress(ObjectError):
            convert(obj)


@settings(max_examples=200)
@given(json_values)
def test_junk_objects_only_ever_raise_object_error(junk: Any) -> None:
    for convert in (pod_from_api, node_from_api, _record):
        with contextlib.suppress(ObjectError):
            convert(junk)


def _record(obj: Any) -> object:
    return pod_record_from_api(obj, ours=True)


def test_pod_record_reads_its_group_by_any_marker_and_its_last_verdict() -> None:
    by_label = api_pod()
    by_label["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "train"}
    by_label["metadata"]["uid"] = "u1"
    by_label["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "message": "needs 2 cpu"}]
    record = pod_record_from_api(by_label, ours=True)
    assert (record.group, record.pod.gang, record.uid, record.scheduled_message) == (
        GangKey("default/train"), GangKey("default/train"), "u1", "needs 2 cpu")
    native = api_pod(schedulingGroup={"podGroupName": "job"})
    assert pod_record_from_api(native, ours=False).group == GangKey("default/job")
    alone = pod_record_from_api(api_pod(), ours=True)
    assert (alone.group, alone.pod.gang, alone.phase) == (
        None, GangKey("default/pod:x"), "Pending")


def test_a_pod_being_deleted_is_terminating_not_terminal() -> None:
    deleted = api_pod(nodeName="n1")
    deleted["metadata"]["deletionTimestamp"] = "2024-05-01T12:01:00Z"
    pod = pod_from_api(deleted)
    assert pod.terminating and not pod.terminal


def test_pod_header_names_even_a_pod_that_cannot_be_read() -> None:
    broken = api_pod(schedulerName="gang", nodeName="n1", containers="lots")
    with pytest.raises(ObjectError):
        pod_from_api(broken)
    header = pod_header(broken)
    assert (header.key, header.scheduler_name, header.bound) == ("default/x", "gang", True)


def test_queue_keeps_what_it_can_read_and_names_what_it_left_out() -> None:
    queue = queue_from_api({"metadata": {"name": "q"},
                            "spec": {"weight": 0, "capability": {"cpu": "lots"}}})
    assert (queue.spec.name, queue.spec.weight, queue.spec.capability) == (
        QueueName("q"), 0, None), "a weight of 0 is kept: the hierarchy makes the queue invalid"
    assert [p.field for p in queue.problems] == ["capability", "weight"]
    assert queue.problems[1] == FieldProblem("weight", "0")
    assert queue.spec.error is not None and queue.spec.error.startswith("capability: ")
    assert queue.spec.error.endswith("; weight: 0"), "its Invalid condition names both"


def test_a_queue_is_read_with_its_parent_and_whether_it_may_be_reclaimed_from() -> None:
    child = queue_from_api({"metadata": {"name": "c"},
                            "spec": {"parent": "team", "reclaimable": False}})
    assert (child.spec.parent, child.spec.reclaimable, child.problems) == ("team", False, ())
    top = queue_from_api({"metadata": {"name": "t"}, "spec": {}})
    assert (top.spec.parent, top.spec.reclaimable) == (None, True)
    odd = queue_from_api({"metadata": {"name": "o"}, "spec": {"parent": 3, "reclaimable": "no"}})
    assert (odd.spec.parent, odd.spec.reclaimable) == (None, True)
    assert [p.field for p in odd.problems] == ["parent", "reclaimable"]


def test_a_queue_is_read_with_the_conditions_last_written_on_it() -> None:
    open_ = {"type": "Open", "status": "True", "reason": "Open", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}
    queue = queue_from_api({"metadata": {"name": "q"}, "spec": {"state": "Closed"},
                            "status": {"conditions": [open_]}})
    assert (queue.spec.open, queue.spec.error, queue.conditions) == (False, None, (open_,))


def test_priority_classes_and_workload_queues() -> None:
    assert priority_class_from_api({"metadata": {"name": "high"}, "value": 1000,
                                    "preemptionPolicy": "Never"}) == PriorityClass(
        "high", 1000, never_preempts=True)
    assert priority_class_from_api({"metadata": {"name": "odd"}, "value": True}) is None
    annotated = {"metadata": {"name": "w", "namespace": "ns",
                              "annotations": {"scheduling.gangsched.io/queue": "research"}}}
    assert workload_queue_from_api(annotated) == WorkloadQueue("ns/w", QueueName("research"))
    assert workload_queue_from_api({"metadata": {"name": "w", "namespace": "ns"}}).queue is None
