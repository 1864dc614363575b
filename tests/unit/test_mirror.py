"""The mirror: watch events in, frozen views out, assume / confirm / forget / expire."""

from __future__ import annotations

from typing import Any

from gangsched.core.model.objects import Flavor, GangKey, NodeName, PodKey, QueueName
from gangsched.core.model.resources import Resources
from gangsched.core.placement.capacity import Placement
from gangsched.feed import Feed, group_kind
from gangsched.mirror import Mirror


def node(name: str, cpu: str = "4") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(name: str, *, ns: str = "ns", cpu: str = "1", scheduler: str = "gang",
        node_name: str | None = None, group: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    labels = {"scheduling.gangsched.io/pod-group": group} if group else {}
    return {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": spec, "status": {"phase": "Pending"}}


def mirror_with(*pods: dict[str, Any]) -> Mirror:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    Feed(mirror).replace("nodes", [node("n1")])
    Feed(mirror).replace("pods", list(pods))
    return mirror


def free_cpu(mirror: Mirror) -> int:
    return mirror.view().snapshot.free(NodeName("n1")).get("cpu")


def test_pods_of_every_scheduler_use_room_but_only_ours_are_members() -> None:
    mirror = mirror_with(pod("theirs", scheduler="default-scheduler", node_name="n1"),
                         pod("ours"))
    view = mirror.view()
    assert [m.pod.key for m in view.members] == ["ns/ours"]
    assert free_cpu(mirror) == 3000


def test_assumed_pod_holds_room_until_forgotten() -> None:
    mirror = mirror_with(pod("a", cpu="3"))
    mirror.assume(Placement(GangKey("ns/pod:a"), ((PodKey("ns/a"), NodeName("n1")),)), now=0.0)
    assert free_cpu(mirror) == 1000
    mirror.forget(PodKey("ns/a"))
    assert free_cpu(mirror) == 4000


def test_watch_confirms_an_assumption() -> None:
    mirror = mirror_with(pod("a", cpu="3"))
    mirror.assume(Placement(GangKey("ns/pod:a"), ((PodKey("ns/a"), NodeName("n1")),)), now=0.0)
    mirror.finish_binding(PodKey("ns/a"), now=1.0)
    Feed(mirror).upsert("pods", pod("a", cpu="3", node_name="n1"))
    assert mirror.assumed == {}
    assert mirror.expire(now=3600.0, ttl=60.0) == []
    assert free_cpu(mirror) == 1000


def test_unconfirmed_assumption_expires_ttl_after_its_bind_finished() -> None:
    mirror = mirror_with(pod("a", cpu="3"))
    mirror.assume(Placement(GangKey("ns/pod:a"), ((PodKey("ns/a"), NodeName("n1")),)), now=0.0)
    mirror.finish_binding(PodKey("ns/a"), now=10.0)
    assert mirror.next_expiry(ttl=60.0) == 70.0
    assert mirror.expire(now=69.0, ttl=60.0) == []
    assert mirror.expire(now=71.0, ttl=60.0) == [PodKey("ns/a")]
    assert free_cpu(mirror) == 4000


def test_assumption_whose_bind_is_still_queued_never_expires() -> None:
    """Binds wait behind the bind concurrency and each may take 30 s: an assumption
    expired meanwhile would hand its room to a second gang."""
    mirror = mirror_with(pod("a", cpu="3"), pod("b", cpu="3"))
    mirror.assume(Placement(GangKey("ns/pod:a"), ((PodKey("ns/a"), NodeName("n1")),)), now=0.0)
    assert mirror.next_expiry(ttl=60.0) is None
    assert mirror.expire(now=3600.0, ttl=60.0) == []
    assert free_cpu(mirror) == 1000
    assert mirror.is_placed(PodKey("ns/a"))
    # A bind finished later starts the clock then, not at the assumption.
    mirror.finish_binding(PodKey("ns/a"), now=3600.0)
    assert mirror.expire(now=3630.0, ttl=60.0) == []
    assert mirror.expire(now=3661.0, ttl=60.0) == [PodKey("ns/a")]


def test_deleted_pod_frees_its_room_and_its_assumption() -> None:
    mirror = mirror_with(pod("a", cpu="3", node_name="n1"))
    Feed(mirror).delete("pods", pod("a"))
    assert free_cpu(mirror) == 4000


def test_relist_drops_pods_deleted_while_the_watch_was_down() -> None:
    mirror = mirror_with(pod("a", node_name="n1"), pod("b", node_name="n1"))
    Feed(mirror).replace("pods", [pod("b", node_name="n1")])
    assert free_cpu(mirror) == 3000


def test_namespace_filter_limits_which_pods_are_ours() -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}), namespaces=frozenset({"team-a"}))
    Feed(mirror).replace("nodes", [node("n1")])
    Feed(mirror).replace("pods", [pod("x", ns="team-a"), pod("y", ns="team-b")])
    assert [m.pod.key for m in mirror.view().members] == ["team-a/x"]


def test_malformed_pod_of_ours_is_kept_aside_with_its_error() -> None:
    mirror = mirror_with(pod("bad", cpu="lots"))
    assert "lots" in mirror.bad_pods[PodKey("ns/bad")]
    assert mirror.view().members == ()


def test_invalid_podgroup_is_recorded_with_its_error_not_raised() -> None:
    mirror = mirror_with()
    body = {"metadata": {"name": "g", "namespace": "ns"},
            "spec": {"minMember": 2, "minResources": {"cpu": "lots"}}}
    Feed(mirror).upsert_group(Flavor.VOLCANO, body)
    record = mirror.groups_and_queues.groups[GangKey("ns/g")]
    assert record.spec is None
    assert record.error is not None and "lots" in record.error


def test_unknown_placement_policy_makes_the_group_invalid_saying_why() -> None:
    mirror = mirror_with()
    body = {"metadata": {"name": "g", "namespace": "ns",
                         "annotations": {"scheduling.gangsched.io/policy": "sprad"}},
            "spec": {"minMember": 2}}
    Feed(mirror).upsert_group(Flavor.GANGSCHED, body)
    record = mirror.groups_and_queues.groups[GangKey("ns/g")]
    assert record.spec is None
    assert record.error is not None and "'sprad' is not one of binpack, spread" in record.error


def test_pod_group_membership_by_label() -> None:
    mirror = mirror_with(pod("w", group="train"))
    assert mirror.view().members[0].group == GangKey("ns/train")


def test_only_changes_that_can_alter_a_decision_wake_the_scheduler() -> None:
    mirror = mirror_with(pod("theirs", scheduler="default-scheduler"), pod("ours"))
    # A node heartbeat changes nothing the core reads.
    beat = node("n1")
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:10Z"
    assert Feed(mirror).upsert("nodes", beat) is False
    assert Feed(mirror).upsert("nodes", node("n1", cpu="8")) is True
    # Another scheduler's pod landing only takes room; finishing frees it.
    assert Feed(mirror).upsert("pods", pod("theirs", scheduler="default-scheduler",
                                     node_name="n1")) is False
    done = pod("theirs", scheduler="default-scheduler", node_name="n1")
    done["status"]["phase"] = "Succeeded"
    assert Feed(mirror).upsert("pods", done) is True
    # The watch confirming our own bind changes nothing; the pod running changes
    # only what its group's status reports, and says so apart.
    reported: list[str] = []
    mirror.on_status_change = lambda: reported.append("status")
    mirror.assume(Placement(GangKey("ns/pod:ours"), ((PodKey("ns/ours"), NodeName("n1")),)), 0.0)
    assert Feed(mirror).upsert("pods", pod("ours", node_name="n1")) is False
    assert reported == []
    running = pod("ours", node_name="n1")
    running["status"]["phase"] = "Running"
    assert Feed(mirror).upsert("pods", running) is False
    assert reported == ["status"]
    # A new pending pod of ours matters; one of another scheduler does not.
    assert Feed(mirror).upsert("pods", pod("new")) is True
    assert Feed(mirror).upsert("pods", pod("other", scheduler="default-scheduler")) is False
    assert Feed(mirror).delete("pods", running) is True


def test_the_first_and_the_last_pod_of_another_scheduler_naming_a_group_matter() -> None:
    """They make the group that scheduler's, and leave it ours again."""
    mirror = mirror_with()
    feed = Feed(mirror)
    first = pod("a", scheduler="other", group="job")
    assert feed.upsert("pods", first) is True
    assert feed.upsert("pods", pod("b", scheduler="other", group="job")) is False
    assert mirror.view().named_by_others == {GangKey("ns/job")}
    assert feed.delete("pods", first) is False
    moved = pod("b", scheduler="other", group="later")
    assert feed.upsert("pods", moved) is True
    assert mirror.view().named_by_others == {GangKey("ns/later")}
    assert feed.delete("pods", moved) is True
    assert mirror.view().named_by_others == frozenset()
    # Ours name groups as members, not as another scheduler's.
    assert feed.upsert("pods", pod("c", group="job")) is True
    assert mirror.view().named_by_others == frozenset()


def test_queue_the_schema_should_have_rejected_is_read_without_crashing() -> None:
    mirror = mirror_with()
    Feed(mirror).upsert_queue({"metadata": {"name": "q"},
                         "spec": {"weight": "heavy", "capability": {"cpu": "lots"},
                                  "state": "Closed"}})
    queue = mirror.groups_and_queues.queues[QueueName("q")]
    assert (queue.weight, queue.capability, queue.open) == (1, None, False)


def test_a_queue_capability_of_zero_is_kept() -> None:
    mirror = mirror_with()
    Feed(mirror).upsert_queue({"metadata": {"name": "q"},
                         "spec": {"capability": {"nvidia.com/gpu": "0", "cpu": "4"}}})
    capability = mirror.groups_and_queues.queues[QueueName("q")].capability
    assert capability is not None
    assert capability.items() == (("cpu", 4000), ("nvidia.com/gpu", 0))
    assert not capability.allows(Resources.of({"nvidia.com/gpu": 1}))


def test_our_own_queue_status_coming_back_wakes_no_cycle() -> None:
    feed = Feed(Mirror(scheduler_names=frozenset({"gang"})))
    queue = {"metadata": {"name": "q"}, "spec": {"weight": 2}}
    assert feed.upsert("queues", queue) is True
    written = {**queue, "status": {"running": 3, "pending": 1}}
    assert feed.upsert("queues", written) is False
    assert feed.upsert("queues", {**written, "spec": {"weight": 3}}) is True
    assert feed.mirror.groups_and_queues.queues[QueueName("q")].weight == 3
    assert feed.delete("queues", written) is True
    assert feed.mirror.groups_and_queues.queues == {}


def test_our_own_group_status_coming_back_wakes_no_cycle_nor_does_another_flavour() -> None:
    feed = Feed(Mirror(scheduler_names=frozenset({"gang"})))
    ours, volcano = group_kind(Flavor.GANGSCHED), group_kind(Flavor.VOLCANO)
    group = podgroup_body("g", uid="u1")
    assert feed.upsert(ours, group) is True
    assert feed.upsert(ours, {**group, "status": {"phase": "Pending"}}) is False
    assert feed.upsert(ours, {**group, "metadata": {**group["metadata"], "generation": 2}}) \
        is False
    # The same name deleted in another API leaves ours in place.
    assert feed.delete(volcano, group) is False
    assert GangKey("ns/g") in feed.mirror.groups_and_queues.groups
    assert feed.delete(ours, group) is True
    assert feed.mirror.groups_and_queues.groups == {}


def podgroup_body(name: str, *, ns: str = "ns", uid: str = "u1",
                  min_member: int = 2) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "uid": uid, "generation": 1},
            "spec": {"minMember": min_member}}


def test_relist_forgets_the_groups_of_its_flavour_deleted_while_the_watch_was_down() -> None:
    """A deleted PodGroup would keep its reservation for good; a relist says it is gone."""
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    ours, native = group_kind(Flavor.GANGSCHED), group_kind(Flavor.NATIVE)
    feed.replace(ours, [podgroup_body("kept"), podgroup_body("gone"),
                        podgroup_body("recreated", uid="old")])
    feed.replace(native, [podgroup_body("native")])
    feed.replace(ours, [podgroup_body("kept"), podgroup_body("recreated", uid="new")])
    assert set(mirror.groups_and_queues.groups) == {"ns/kept", "ns/recreated", "ns/native"}
    assert mirror.groups_and_queues.groups[GangKey("ns/recreated")].uid == "new"
    assert mirror.groups_and_queues.groups[GangKey("ns/native")].flavor is Flavor.NATIVE
    feed.replace(native, [])
    assert set(mirror.groups_and_queues.groups) == {"ns/kept", "ns/recreated"}


def test_relist_forgets_queues_and_workloads_deleted_while_the_watch_was_down() -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)

    def workload(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "annotations": {
            "scheduling.gangsched.io/queue": "research"}}}

    feed.replace("queues", [{"metadata": {"name": n}, "spec": {"weight": 2}}
                            for n in ("kept", "gone")])
    feed.replace("workloads", [workload("kept"), workload("gone")])
    assert mirror.groups_and_queues.workload_queues == {"ns/kept": "research",
                                                        "ns/gone": "research"}
    feed.replace("queues", [{"metadata": {"name": "kept"}, "spec": {"weight": 2}}])
    feed.replace("workloads", [workload("kept")])
    assert set(mirror.groups_and_queues.queues) == {"kept"}
    assert mirror.groups_and_queues.workload_queues == {"ns/kept": "research"}


def test_a_scheduler_given_namespaces_holds_only_their_groups_and_workloads() -> None:
    """Another namespace's PodGroups are another scheduler's: it never reports on them."""
    mirror = Mirror(scheduler_names=frozenset({"gang"}), namespaces=frozenset({"team-a"}))
    feed = Feed(mirror)
    feed.replace(group_kind(Flavor.GANGSCHED),
                 [podgroup_body("g", ns="team-a"), podgroup_body("g", ns="team-b")])
    feed.replace("workloads", [
        {"metadata": {"name": "w", "namespace": ns,
                      "annotations": {"scheduling.gangsched.io/queue": "research"}}}
        for ns in ("team-a", "team-b")])
    assert set(mirror.groups_and_queues.groups) == {"team-a/g"}
    assert set(mirror.groups_and_queues.workload_queues) == {"team-a/w"}


def test_a_terminating_member_keeps_its_room_but_leaves_its_gang() -> None:
    mirror = mirror_with(pod("w", cpu="3", node_name="n1", group="train"))
    leaving = pod("w", cpu="3", node_name="n1", group="train")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    assert Feed(mirror).upsert("pods", leaving) is True  # its gang changed
    assert mirror.view().members == ()
    assert free_cpu(mirror) == 1000
    assert Feed(mirror).delete("pods", leaving) is True  # its room is free for a waiting gang
    assert free_cpu(mirror) == 4000


def budget_body(name: str, allowed: int, *, generation: int = 1, observed: int = 1,
                selector: Any = None) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": "ns", "generation": generation},
            "spec": {"maxUnavailable": 1,
                     "selector": selector if selector is not None else {
                         "matchLabels": {"app": "train"},
                         "matchExpressions": [{"key": "tier", "operator": "Exists"}]}},
            "status": {"disruptionsAllowed": allowed, "observedGeneration": observed}}


def test_disruption_budgets_are_mirrored_with_what_they_allow_now() -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    Feed(mirror).replace("poddisruptionbudgets", [budget_body("a", 1), budget_body("b", 2)])
    budget = mirror.budgets_and_storage.budgets["ns/a"]
    assert (budget.namespace, budget.match_labels, budget.disruptions_allowed) == (
        "ns", (("app", "train"),), 1)
    assert [r.operator for r in budget.match_expressions] == ["Exists"]
    # A budget changed since the disruption controller last counted it allows nothing,
    # as the Eviction API then refuses every pod.
    assert Feed(mirror).upsert("poddisruptionbudgets", budget_body("a", 1, generation=2))
    assert mirror.budgets_and_storage.budgets["ns/a"].disruptions_allowed == 0
    # One that cannot be read protects every pod of its namespace.
    Feed(mirror).upsert("poddisruptionbudgets", budget_body("c", 5, selector={"matchLabels": 3}))
    unreadable = mirror.budgets_and_storage.budgets["ns/c"]
    assert (unreadable.match_labels, unreadable.selects_pods,
            unreadable.disruptions_allowed) == ((), True, 0)
    assert Feed(mirror).delete("poddisruptionbudgets", budget_body("b", 2))
    Feed(mirror).replace("poddisruptionbudgets", [budget_body("a", 1)])
    assert sorted(mirror.budgets_and_storage.budgets) == ["ns/a"]


def test_a_budget_owned_by_a_podgroup_is_mirrored_as_that_gangs_own() -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    owned = budget_body("job", 0)
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x", "uid": "rs-1"},
        {"apiVersion": "scheduling.gangsched.io/v1alpha1", "kind": "PodGroup",
         "name": "job", "uid": "pg-1", "controller": True}]
    Feed(mirror).replace("poddisruptionbudgets", [owned, budget_body("mine", 0)])
    budgets = mirror.budgets_and_storage.budgets
    assert (budgets["ns/job"].group_uid, budgets["ns/mine"].group_uid) == ("pg-1", "")


def test_nodepools_are_mirrored_with_the_room_their_limits_leave() -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    limited = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
               "metadata": {"name": "gpu"},
               "spec": {"limits": {"cpu": 100, "nvidia.com/gpu": "16", "memory": "64Gi"},
                        "template": {
                            "metadata": {"labels": {"team": "ml"}},
                            "spec": {"requirements": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In",
                                 "values": ["a"], "minValues": 1},
                                {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt",
                                 "values": ["8"]}]}}},
               "status": {"resources": {"cpu": "96", "nvidia.com/gpu": "20", "nodes": "3"}}}
    unlimited = {"metadata": {"name": "default"}, "spec": {"template": {"spec": {}}}}
    broken = {"metadata": {"name": "bad"}, "spec": {"limits": {"cpu": "lots"}}}
    Feed(mirror).replace("nodepools", [limited, unlimited, broken])
    pools = mirror.budgets_and_storage.nodepools
    assert sorted(pools) == ["default", "gpu"], "an unreadable NodePool is left out"
    gpu = pools["gpu"]
    assert gpu.headroom == (("cpu", 4000), ("memory", 64 * 2**30), ("nvidia.com/gpu", 0))
    assert gpu.labels == (("team", "ml"),)
    assert [(r.key, r.operator, r.values) for r in gpu.requirements] == [
        ("topology.kubernetes.io/zone", "In", ("a",))]
    assert pools["default"].headroom is None


def claim(name: str, **annotations: str) -> dict[str, Any]:
    return {"kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "ns", "annotations": annotations},
            "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"]}}


def test_claims_volumes_and_classes_are_mirrored_and_reach_the_view() -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    assert feed.upsert("persistentvolumeclaims", claim("data"))
    assert not feed.upsert("persistentvolumeclaims", claim("data"))  # nothing changed
    feed.upsert("persistentvolumes", {"metadata": {"name": "pv-1"}, "spec": {}})
    feed.upsert("storageclasses", {"metadata": {"name": "local"}, "provisioner": "p",
                                   "volumeBindingMode": "WaitForFirstConsumer"})
    storage = mirror.view().storage
    assert set(storage.claims) == {"ns/data"} and set(storage.volumes) == {"pv-1"}
    assert storage.classes["local"].wait_for_first_consumer
    assert feed.delete("persistentvolumeclaims", claim("data"))
    feed.replace("storageclasses", [])
    assert not mirror.view().storage.claims and not mirror.view().storage.classes


def test_an_unreadable_claim_is_left_out_and_its_pods_wait_for_it() -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    bad = claim("data")
    bad["spec"]["accessModes"] = "ReadWriteOnce"
    assert not Feed(mirror).upsert("persistentvolumeclaims", bad)
    assert mirror.view().storage.claims == {}


def test_a_claim_node_asked_for_is_assumed_until_the_watch_says_otherwise() -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    feed.upsert("persistentvolumeclaims", claim("data"))
    mirror.budgets_and_storage.assume_claim_node("ns/data", NodeName("n1"))
    assert mirror.view().storage.claims["ns/data"].selected_node == "n1"
    feed.upsert("persistentvolumeclaims",
                claim("data", **{"volume.kubernetes.io/selected-node": "n2"}))
    assert mirror.view().storage.claims["ns/data"].selected_node == "n2"
