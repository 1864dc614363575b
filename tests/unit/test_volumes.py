"""Claims as VolumeBinding, VolumeZone and VolumeRestrictions read them: what blocks a pod,
which nodes its volumes reach, and which claims wait to be provisioned."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gangsched.core.fit.nodefit import node_excluded_reason
from gangsched.core.fit.volumes import Storage, claims_in_use, resolve_pod, with_volumes
from gangsched.core.kubeobjects.pods import pod_from_api
from gangsched.core.kubeobjects.storage import (
    claim_from_api,
    csi_driver_from_api,
    storage_capacity_from_api,
    storage_class_from_api,
    volume_from_api,
)
from gangsched.core.model.objects import (
    Claim,
    ClaimRef,
    Gang,
    Node,
    NodeName,
    Pod,
    PodKey,
    SelectorRequirement,
    SelectorTerm,
    StorageClassSpec,
    Volume,
    VolumeProblem,
)
from gangsched.core.model.resources import Resources
from gangsched.core.reasons import VolumeBlocked
from gangsched.feed import Feed
from gangsched.mirror import Mirror
from tests.unit.test_cycle import SIX_CPU, cycle, gang, placed, reasons

WFFC = StorageClassSpec("local", "rancher.io/local-path", wait_for_first_consumer=True)
IMMEDIATE = StorageClassSpec("fast", "example.com/disk")
ON_N2 = Volume("pv-n2", node_affinity=(SelectorTerm(match_expressions=(
    SelectorRequirement("kubernetes.io/hostname", "In", ("n2",)),)),))


def storage(*claims: Claim, volumes: tuple[Volume, ...] = (ON_N2,)) -> Storage:
    return Storage({c.key: c for c in claims}, {v.name: v for v in volumes},
                   {c.name: c for c in (WFFC, IMMEDIATE)})


def user(name: str = "p", *refs: ClaimRef, on: str | None = None) -> Pod:
    return Pod(PodKey(f"ns/{name}"), Resources.of({"cpu": 1000, "pods": 1}),
               claims=refs or (ClaimRef("data"),),
               node_name=NodeName(on) if on else None)


def node(name: str, **labels: str) -> Node:
    return Node(NodeName(name), Resources.of({"cpu": 2000, "pods": 110}),
                labels=(("kubernetes.io/hostname", name), *sorted(labels.items())))


BOUND = Claim("ns/data", "", volume_name="pv-n2", bound=True)
NAMED = [node("n1"), node("n2"), node("n3")]
"""Two CPUs each, with their hostname labels."""


@pytest.mark.parametrize(("claim", "problem"), [
    (None, VolumeProblem.MISSING),
    (Claim("ns/data", "fast"), VolumeProblem.UNBOUND_IMMEDIATE),
    (Claim("ns/data", ""), VolumeProblem.UNBOUND_IMMEDIATE),
    (Claim("ns/data", "local", volume_name="pv-n2"), VolumeProblem.UNBOUND_IMMEDIATE),
    (Claim("ns/data", "gone"), VolumeProblem.CLASS_MISSING),
    (Claim("ns/data", "", volume_name="pv-x", bound=True), VolumeProblem.VOLUME_MISSING),
    (replace(BOUND, lost=True), VolumeProblem.LOST),
    (replace(BOUND, deleting=True), VolumeProblem.DELETING),
])
def test_a_claim_that_cannot_bind_blocks_its_pod_naming_the_claim(
    claim: Claim | None, problem: VolumeProblem
) -> None:
    resolved = resolve_pod(user(), storage(*([claim] if claim else [])), "uid", {})
    assert resolved.volume_block is not None
    assert (resolved.volume_block.claim, resolved.volume_block.problem) == ("ns/data", problem)


def test_a_claim_name_that_no_claim_can_have_says_so() -> None:
    resolved = resolve_pod(user("p", ClaimRef("Not_A_Name")), storage(), "uid", {})
    assert resolved.volume_block is not None
    assert (resolved.volume_block.claim, resolved.volume_block.problem) == (
        "ns/Not_A_Name", VolumeProblem.INVALID_NAME)


def test_a_bound_volume_keeps_the_pod_to_the_nodes_its_affinity_names() -> None:
    resolved = resolve_pod(user(), storage(BOUND), "uid", {})
    assert resolved.volume_block is None and resolved.unbound_claims == ()
    excluded = {n.name: node_excluded_reason(resolved.rules, n) for n in NAMED}
    assert excluded == {"n1": "volume node affinity", "n2": None, "n3": "volume node affinity"}


def test_a_zonal_volume_takes_nodes_of_its_zone_and_nodes_with_no_zone_at_all() -> None:
    zonal = Volume("pv-z", zones=(("topology.kubernetes.io/zone", ("a", "b")),))
    beta = Volume("pv-z", zones=(("failure-domain.beta.kubernetes.io/zone", ("a",)),))
    claim = Claim("ns/data", "", volume_name="pv-z", bound=True)
    zone = "topology.kubernetes.io/zone"
    nodes = [node("in-a", **{zone: "a"}), node("in-b", **{zone: "b"}),
             node("in-c", **{zone: "c"}), node("unzoned")]
    allowed = {n.name for n in nodes if node_excluded_reason(
        resolve_pod(user(), storage(claim, volumes=(zonal,)), "u", {}).rules, n) is None}
    assert allowed == {"in-a", "in-b", "unzoned"}
    # A beta label of the volume matches the node's GA label.
    allowed = {n.name for n in nodes if node_excluded_reason(
        resolve_pod(user(), storage(claim, volumes=(beta,)), "u", {}).rules, n) is None}
    assert allowed == {"in-a", "unzoned"}


def test_a_claim_waiting_for_its_first_consumer_goes_where_its_class_allows() -> None:
    zone = "topology.kubernetes.io/zone"
    allowed = replace(WFFC, allowed_topologies=(SelectorTerm(match_expressions=(
        SelectorRequirement(zone, "In", ("a",)),)),))
    data = Claim("ns/data", "local")
    stored = replace(storage(data), classes={"local": allowed})
    resolved = resolve_pod(user(), stored, "uid", {})
    assert resolved.volume_block is None and resolved.unbound_claims == ("ns/data",)
    assert node_excluded_reason(resolved.rules, node("x", **{zone: "a"})) is None
    assert node_excluded_reason(resolved.rules, node("y", **{zone: "b"})) is not None
    # Once given a node it is provisioned there: its pod may go nowhere else.
    given = resolve_pod(user(), storage(replace(data, selected_node=NodeName("n3"))), "u", {})
    assert [n.name for n in SIX_CPU if node_excluded_reason(given.rules, n) is None] == ["n3"]


ZONE = "topology.kubernetes.io/zone"


def capacity(name: str, size: str | None, zone: str | None, *, max_size: str | None = None,
             namespace: str = "kube-system", storage_class: str = "local") -> dict[str, Any]:
    """A CSIStorageCapacity as a driver publishes it: for one zone (``""``: every node,
    None: no topology at all)."""
    found: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
                             "metadata": {"name": name, "namespace": namespace},
                             "storageClassName": storage_class}
    if zone is not None:
        found["nodeTopology"] = {"matchLabels": {ZONE: zone}} if zone else {}
    if size is not None:
        found["capacity"] = size
    if max_size is not None:
        found["maximumVolumeSize"] = max_size
    return found


def sized_claim(size: str) -> Claim:
    return claim_from_api(api_object(spec={"storageClassName": "local",
                                           "resources": {"requests": {"storage": size}}}))


def with_capacity(claim: Claim, *capacities: dict[str, Any], publishes: bool = True) -> Storage:
    driver = csi_driver_from_api({"metadata": {"name": WFFC.provisioner},
                                  "spec": {"storageCapacity": publishes}})
    read = (storage_capacity_from_api(c) for c in capacities)
    return replace(storage(claim), csi_drivers={driver.name: driver},
                   capacities={c.key: c for c in read})


ZONED = [node("x", **{ZONE: "a"}), node("y", **{ZONE: "b"}), node("z")]


def allowed(stored: Storage) -> dict[str, str | None]:
    rules = resolve_pod(user(), stored, "uid", {}).rules
    return {n.name: node_excluded_reason(rules, n) for n in ZONED}


def test_a_claim_to_provision_goes_where_its_driver_publishes_room_for_it() -> None:
    """VolumeBinding's capacity check: a driver with ``storageCapacity`` provisions a
    claim only where a CSIStorageCapacity of its class, in any namespace, reaches the
    node with room for the claim's size (the largest volume size when given)."""
    small = sized_claim("5Gi")
    assert allowed(with_capacity(small, capacity("a", "10Gi", "a"))) == {
        "x": None, "y": "not enough free storage", "z": "not enough free storage"}
    pools = (capacity("a", "4Gi", "a"), capacity("b", "5Gi", "b", namespace="elsewhere"),
             capacity("all", "1Gi", ""))
    assert allowed(with_capacity(small, *pools)) == {
        "x": "not enough free storage", "y": None, "z": "not enough free storage"}
    # the largest volume a pool can make counts, not what it holds in all
    assert allowed(with_capacity(small, capacity("a", "1Ti", "", max_size="1Gi")))["x"] == \
        "not enough free storage"
    # an empty topology reaches every node; none reaches no node; no size says no room
    assert set(allowed(with_capacity(small, capacity("a", "6Gi", ""))).values()) == {None}
    nowhere = with_capacity(small, capacity("a", "6Gi", None), capacity("b", None, ""))
    assert set(allowed(nowhere).values()) == {"not enough free storage"}
    # another class's capacity does not count
    other = with_capacity(small, capacity("a", "6Gi", "", storage_class="fast"))
    assert set(allowed(other).values()) == {"not enough free storage"}


def test_storage_capacity_is_not_looked_at_unless_the_driver_publishes_it() -> None:
    """A driver without ``storageCapacity``, a claim asking no size, and a claim already
    given its node go where they went before."""
    none = sized_claim("5Gi")
    assert set(allowed(with_capacity(none, publishes=False)).values()) == {None}
    assert set(allowed(with_capacity(Claim("ns/data", "local"))).values()) == {None}
    given = replace(none, selected_node=NodeName("z"))
    assert allowed(with_capacity(given))["z"] is None


def test_a_gang_whose_claims_have_no_room_anywhere_waits_and_takes_the_node_with_room() -> None:
    train = gang("ns/train", 1)
    train = replace(train, pending=(replace(train.pending[0], claims=(ClaimRef("data"),)),))
    stored = with_capacity(sized_claim("5Gi"), capacity("a", "8Gi", "b"))
    result = cycle(ZONED, with_volumes([train], stored, {}, {}))
    assert [a for p in result.placements for a in p.assignments] == [("ns/train-0", "y")]
    empty = with_capacity(sized_claim("5Gi"))
    assert cycle(ZONED, with_volumes([train], empty, {}, {})).placements == ()


def test_a_class_without_provisioner_keeps_unbound_claims_waiting() -> None:
    static = StorageClassSpec("static", "kubernetes.io/no-provisioner",
                              wait_for_first_consumer=True)
    stored = replace(storage(Claim("ns/data", "static")), classes={"static": static})
    resolved = resolve_pod(user(), stored, "uid", {})
    assert resolved.volume_block is not None
    assert resolved.volume_block.problem is VolumeProblem.NO_PROVISIONER


def test_an_ephemeral_claim_must_exist_and_belong_to_the_pod() -> None:
    scratch = ClaimRef("scratch", ephemeral=True)
    missing = resolve_pod(user("p", scratch), storage(), "uid-p", {})
    assert missing.volume_block is not None
    assert missing.volume_block.claim == "ns/p-scratch"
    assert missing.volume_block.problem is VolumeProblem.EPHEMERAL_MISSING
    claim = Claim("ns/p-scratch", "local", owners=("uid-other",))
    foreign = resolve_pod(user("p", scratch), storage(claim), "uid-p", {})
    assert foreign.volume_block is not None
    assert foreign.volume_block.problem is VolumeProblem.NOT_OWNED
    own = resolve_pod(user("p", scratch), storage(replace(claim, owners=("uid-p",))), "uid-p", {})
    assert own.volume_block is None and own.unbound_claims == ("ns/p-scratch",)


def test_a_read_write_once_pod_claim_in_use_blocks_others_but_not_its_user() -> None:
    rwop = replace(BOUND, access_modes=("ReadWriteOncePod",))
    holder = user("holder", on="n2")
    in_use = claims_in_use([holder])
    blocked = resolve_pod(user("other"), storage(rwop), "u", in_use)
    assert blocked.volume_block is not None
    assert blocked.volume_block.problem is VolumeProblem.IN_USE
    assert blocked.volume_block.other == "ns/holder"
    assert resolve_pod(holder, storage(rwop), "u", in_use).volume_block is None
    # ReadWriteOnce may be shared by pods of one node.
    assert resolve_pod(user("other"), storage(BOUND), "u", in_use).volume_block is None


def test_a_gang_whose_members_share_a_read_write_once_pod_claim_waits_whole() -> None:
    rwop = replace(BOUND, access_modes=("ReadWriteOncePod",))
    workers = gang("ns/w", 2)
    workers = replace(workers, pending=tuple(replace(p, claims=(ClaimRef("data"),))
                                             for p in workers.pending))
    resolved = with_volumes([workers], storage(rwop), {}, {})
    result = cycle(SIX_CPU, resolved)
    assert placed(result) == []
    reason = reasons(result)["ns/w"]
    assert isinstance(reason, VolumeBlocked)
    assert reason.block.problem is VolumeProblem.SHARED_IN_GANG
    assert reason.block.other == "ns/w-0"


def test_of_two_gangs_placed_in_one_cycle_only_one_gets_a_read_write_once_pod_claim() -> None:
    """Each gang alone may use the claim; placed in one cycle, the first one takes it and
    the other waits whole, naming the claim and the pod that took it."""
    rwop = replace(BOUND, access_modes=("ReadWriteOncePod",))

    def on_claim(key: str) -> Gang:
        made = gang(key, 2)
        first, second = made.pending
        return replace(made, pending=(first, replace(second, claims=(ClaimRef("data"),))))

    result = cycle(NAMED, with_volumes([on_claim("ns/a"), on_claim("ns/b")], storage(rwop),
                                       {}, {}))
    assert placed(result) == ["ns/a"]
    reason = reasons(result)["ns/b"]
    assert isinstance(reason, VolumeBlocked)
    assert (reason.pod, reason.block.claim, reason.block.problem, reason.block.other) == (
        "ns/b-1", "ns/data", VolumeProblem.IN_USE, "ns/a-1")


def test_a_gang_with_a_member_whose_claim_is_missing_waits_whole_and_others_place() -> None:
    train = gang("ns/train", 2)
    train = replace(train, pending=(replace(train.pending[0], claims=(ClaimRef("absent"),)),
                                    train.pending[1]))
    result = cycle(SIX_CPU, with_volumes([train, gang("ns/other", 2)], storage(), {}, {}))
    assert placed(result) == ["ns/other"]
    reason = reasons(result)["ns/train"]
    assert isinstance(reason, VolumeBlocked)
    assert (reason.pod, reason.block.claim, reason.block.problem, reason.others) == (
        "ns/train-0", "ns/absent", VolumeProblem.MISSING, 0)


def test_bound_claims_restrict_placement_to_their_volume_nodes() -> None:
    train = gang("ns/train", 1)
    train = replace(train, pending=(replace(train.pending[0], claims=(ClaimRef("data"),)),))
    result = cycle(NAMED, with_volumes([train], storage(BOUND), {}, {}))
    assert [a for p in result.placements for a in p.assignments] == [("ns/train-0", "n2")]


def api_object(**fields: Any) -> dict[str, Any]:
    return {"metadata": {"name": "data", "namespace": "ns"}, **fields}


def test_claims_volumes_and_classes_are_read_as_kube_scheduler_reads_them() -> None:
    claim = claim_from_api(api_object(
        metadata={"name": "data", "namespace": "ns", "annotations": {
            "pv.kubernetes.io/bind-completed": "yes",
            "volume.kubernetes.io/selected-node": "n1"}},
        spec={"storageClassName": "local", "volumeName": "pv-1",
              "accessModes": ["ReadWriteOncePod"]},
        status={"phase": "Bound"}))
    assert claim == Claim("ns/data", "local", "pv-1", bound=True, selected_node=NodeName("n1"),
                          access_modes=("ReadWriteOncePod",))
    # Named but not yet completed: not bound.
    assert not claim_from_api(api_object(spec={"volumeName": "pv-1"})).bound
    volume = volume_from_api({
        "metadata": {"name": "pv-1", "labels": {"topology.kubernetes.io/zone": "a__b"}},
        "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]}]}}}})
    assert volume.zones == (("topology.kubernetes.io/zone", ("a", "b")),)
    assert volume.node_affinity == (SelectorTerm(match_expressions=(
        SelectorRequirement("k", "In", ("v",)),)),)
    storage_class = storage_class_from_api({
        "metadata": {"name": "local"}, "provisioner": "p",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "z", "values": ["a"]}]}]})
    assert storage_class == StorageClassSpec("local", "p", True, (SelectorTerm(
        match_expressions=(SelectorRequirement("z", "In", ("a",)),)),))


def test_a_pod_reads_its_claims_and_ephemeral_volumes() -> None:
    pod = pod_from_api({
        "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2024-05-01T12:00:00Z"},
        "spec": {"containers": [{"name": "main"}], "volumes": [
            {"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "b", "emptyDir": {}},
            {"name": "c", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]},
    })
    assert pod.claims == (ClaimRef("data"), ClaimRef("c", ephemeral=True))


def test_a_volume_term_on_node_names_is_matched_as_kube_scheduler_does_without_a_name() -> None:
    """CheckNodeAffinity matches a volume's terms against a node made of labels alone."""
    def allowed(*fields: SelectorRequirement) -> list[str]:
        volume = Volume("pv-f", node_affinity=(SelectorTerm(match_fields=fields),))
        resolved = resolve_pod(user(), storage(replace(BOUND, volume_name="pv-f"),
                                               volumes=(volume,)), "u", {})
        return [n.name for n in NAMED if node_excluded_reason(resolved.rules, n) is None]

    assert allowed(SelectorRequirement("metadata.name", "In", ("n1",))) == []
    assert allowed(SelectorRequirement("metadata.name", "NotIn", ("n1",))) == ["n1", "n2", "n3"]


def test_the_mirror_holds_the_published_capacities_until_they_go() -> None:
    mirror = Mirror(scheduler_names=frozenset({"gang"}))
    feed = Feed(mirror)
    feed.upsert("csistoragecapacities", capacity("pool-a", "10Gi", "a"))
    feed.upsert("csidrivers", {"metadata": {"name": WFFC.provisioner},
                               "spec": {"storageCapacity": True}})
    stored = mirror.view().storage
    assert stored.csi_drivers[WFFC.provisioner].storage_capacity
    assert [(c.key, c.size) for c in stored.capacities.values()] == [
        ("kube-system/pool-a", 10 * 2**30)]
    feed.delete("csistoragecapacities", capacity("pool-a", "10Gi", "a"))
    assert not mirror.view().storage.capacities
