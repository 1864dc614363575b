"""What a pod's PersistentVolumeClaims ask of its node, as kube-scheduler reads them.

kube-scheduler's VolumeBinding, VolumeZone and VolumeRestrictions filters
decide three things of a pod with claims, and so does this module, once per
cycle, before placement:

- whether it can go anywhere at all: a claim missing, being deleted, lost, or
  unbound with a class that binds immediately keeps it off every node (kube-
  scheduler's ``UnschedulableAndUnresolvable``), and so does a ReadWriteOncePod
  claim another pod already uses (or a pod placed earlier in the same cycle:
  the pod's ``sole_claims``, which the cycle checks as it places);
- which nodes its volumes reach: a bound volume's node affinity and zone
  labels, a WaitForFirstConsumer class's allowed topologies, and the node a
  claim being provisioned was given. These become node terms of the pod's
  rules, so the placement search prunes on them like on node affinity;
- which claims must still be provisioned on its node before it may be bound
  (WaitForFirstConsumer claims not bound yet).

The pod waits whole with its gang when one of its claims blocks it: binding
the others would split the gang around a member that cannot run.
Matching an unbound WaitForFirstConsumer claim to an existing unbound volume
(static provisioning) is not done here: such a claim is provisioned, so a
class without a provisioner keeps its pods waiting, saying so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gangsched.core.fit.nodefit import CAPACITY_KEY
from gangsched.core.model.objects import (
    Claim,
    CsiDriver,
    CsiNode,
    Gang,
    NodeName,
    Pod,
    PodKey,
    SelectorRequirement,
    SelectorTerm,
    StorageCapacity,
    StorageClassSpec,
    Volume,
    VolumeAttachmentSpec,
    VolumeBlock,
    VolumeProblem,
)
from gangsched.core.reasons import VolumeBlocked

__all__ = [
    "SELECTED_NODE_ANNOTATION",
    "Provisioning",
    "Storage",
    "claims_in_use",
    "resolve_pod",
    "volume_reason",
    "with_volumes",
]

SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
ZONE_LABELS = (
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)
"""The labels VolumeZone compares between a volume and a node."""
_GA_LABEL = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True, slots=True)
class Provisioning:
    """A placed gang whose claims were given nodes, waiting for them to be bound
    (see core.provisioning); kept in the step's state."""

    since: float
    backoff_until: float | None = None
    """Set when its claims timed out: it is not placed again before then."""


@dataclass(frozen=True, slots=True)
class Storage:
    """The claims, volumes and storage classes of the cluster, frozen for one cycle."""

    claims: Mapping[str, Claim] = field(default_factory=dict)
    volumes: Mapping[str, Volume] = field(default_factory=dict)
    classes: Mapping[str, StorageClassSpec] = field(default_factory=dict)
    csi_nodes: Mapping[NodeName, CsiNode] = field(default_factory=dict)
    """CSINodes by node: the drivers on each and their volume limits
    (core.placement.volumelimits)."""
    attachments: Mapping[str, VolumeAttachmentSpec] = field(default_factory=dict)
    csi_drivers: Mapping[str, CsiDriver] = field(default_factory=dict)
    capacities: Mapping[str, StorageCapacity] = field(default_factory=dict)
    """CSIStorageCapacity objects by ``namespace/name``: where a driver can make a volume."""


def claims_in_use(pods: Iterable[Pod]) -> dict[str, PodKey]:
    """Claims (``namespace/name``) used by pods on nodes, to one such pod each.

    kube-scheduler counts every pod assigned to a node, finished or not, against a
    ReadWriteOncePod claim; so does this.
    """
    users: dict[str, PodKey] = {}
    for pod in pods:
        if pod.node_name is None:
            continue
        namespace = pod.key.split("/", 1)[0]
        for ref in pod.claims:
            users.setdefault(f"{namespace}/{_claim_name(pod, ref.name, ref.ephemeral)}", pod.key)
    return users


def volume_reason(gang: Gang) -> VolumeBlocked | None:
    """Why a gang with a pending member its claims block waits, or None when none is.

    No room would let such a member run, and placing the others would split the
    gang around it: the whole gang waits, untried, until the claim is fixed.
    """
    blocked = [pod for pod in gang.pending if pod.volume_block is not None]
    if not blocked or blocked[0].volume_block is None:
        return None
    return VolumeBlocked(blocked[0].key, blocked[0].volume_block, len(blocked) - 1)


def _claim_name(pod: Pod, name: str, ephemeral: bool) -> str:
    return f"{pod.key.split('/', 1)[1]}-{name}" if ephemeral else name


def with_volumes(
    gangs: Sequence[Gang], storage: Storage, uids: Mapping[PodKey, str],
    in_use: Mapping[str, PodKey],
) -> tuple[Gang, ...]:
    """The gangs, each pending pod with claims resolved (see :func:`resolve_pod`).

    A ReadWriteOncePod claim shared by two pending members of one gang blocks
    the later one: only one of them could ever run, and kube-scheduler would
    bind the first and refuse the second, splitting the gang.
    """
    result = []
    for gang in gangs:
        if not any(pod.claims for pod in gang.pending):
            result.append(gang)
            continue
        taken: dict[str, PodKey] = {}
        pending = []
        for pod in gang.pending:
            resolved = resolve_pod(pod, storage, uids.get(pod.key, ""), in_use)
            if resolved.volume_block is None:
                resolved = _shared_in_gang(resolved, storage, taken)
            pending.append(resolved)
        result.append(replace(gang, pending=tuple(pending)))
    return tuple(result)


def _shared_in_gang(pod: Pod, storage: Storage, taken: dict[str, PodKey]) -> Pod:
    namespace = pod.key.split("/", 1)[0]
    for ref in pod.claims:
        key = f"{namespace}/{_claim_name(pod, ref.name, ref.ephemeral)}"
        claim = storage.claims.get(key)
        if claim is None or READ_WRITE_ONCE_POD not in claim.access_modes:
            continue
        other = taken.setdefault(key, pod.key)
        if other != pod.key:
            return replace(pod, volume_block=VolumeBlock(key, VolumeProblem.SHARED_IN_GANG, other))
    return pod


def resolve_pod(pod: Pod, storage: Storage, uid: str, in_use: Mapping[str, PodKey]) -> Pod:
    """The pod with the block, node terms and unbound claims its claims give it.

    The first claim that blocks it is named; the node terms of all its other
    claims are kept on its rules, beside its own node affinity.
    """
    namespace = pod.key.split("/", 1)[0]
    terms: list[tuple[SelectorTerm, ...]] = []
    unbound: list[str] = []
    sole: list[str] = []
    for ref in pod.claims:
        name = _claim_name(pod, ref.name, ref.ephemeral)
        key = f"{namespace}/{name}"
        claim = storage.claims.get(key)
        problem = _problem(name, claim, ref.ephemeral, uid, storage)
        other = in_use.get(key)
        if problem is None and claim is not None and other is not None and other != pod.key \
                and READ_WRITE_ONCE_POD in claim.access_modes:
            return replace(pod, volume_block=VolumeBlock(key, VolumeProblem.IN_USE, other))
        if problem is not None or claim is None:
            return replace(pod, volume_block=VolumeBlock(key, problem or VolumeProblem.MISSING))
        if READ_WRITE_ONCE_POD in claim.access_modes:
            sole.append(key)
        if claim.bound:
            terms.extend(_volume_terms(storage.volumes[claim.volume_name]))
        else:
            unbound.append(key)
            terms.extend(_provision_terms(claim, storage.classes[claim.storage_class], storage))
    rules = replace(pod.rules, volume_affinity=tuple(terms))
    return replace(pod, rules=rules, unbound_claims=tuple(unbound), sole_claims=tuple(sole))


def _problem(
    name: str, claim: Claim | None, ephemeral: bool, uid: str, storage: Storage
) -> VolumeProblem | None:
    """Why the claim keeps the pod off every node, or None when it does not (its
    volume and class are then known)."""
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        return VolumeProblem.INVALID_NAME
    if claim is None:
        return VolumeProblem.EPHEMERAL_MISSING if ephemeral else VolumeProblem.MISSING
    if ephemeral and uid not in claim.owners:
        return VolumeProblem.NOT_OWNED
    if claim.lost:
        return VolumeProblem.LOST
    if claim.deleting:
        return VolumeProblem.DELETING
    if claim.bound:
        return None if claim.volume_name in storage.volumes else VolumeProblem.VOLUME_MISSING
    storage_class = storage.classes.get(claim.storage_class)
    # A claim without a class, or pre-bound to a volume by name, binds immediately.
    if not claim.storage_class or claim.volume_name:
        return VolumeProblem.UNBOUND_IMMEDIATE
    if storage_class is None:
        return VolumeProblem.CLASS_MISSING
    if not storage_class.wait_for_first_consumer:
        return VolumeProblem.UNBOUND_IMMEDIATE
    if storage_class.provisioner in ("", NO_PROVISIONER):
        return VolumeProblem.NO_PROVISIONER
    return None


def _volume_terms(volume: Volume) -> list[tuple[SelectorTerm, ...]]:
    """A bound volume's node affinity, then one entry per zone label (VolumeZone).

    VolumeZone lets a node that carries none of the zone labels take the pod
    (a cluster of one zone); a beta label of the volume matches the node's GA
    label when the node lacks the beta one.
    """
    found: list[tuple[SelectorTerm, ...]] = []
    if volume.node_affinity is not None:
        found.append(tuple(_nameless(term) for term in volume.node_affinity))
    unzoned = SelectorTerm(match_expressions=tuple(
        SelectorRequirement(label, "DoesNotExist", ()) for label in ZONE_LABELS))
    for label, values in volume.zones:
        terms = [unzoned, SelectorTerm(match_expressions=(
            SelectorRequirement(label, "In", values),))]
        if label in _GA_LABEL:
            terms.append(SelectorTerm(match_expressions=(
                SelectorRequirement(label, "DoesNotExist", ()),
                SelectorRequirement(_GA_LABEL[label], "In", values),
            )))
        found.append(tuple(terms))
    return found


_ALWAYS = SelectorRequirement("gangsched.io/no label has this key", "DoesNotExist", ())
"""A requirement every node meets: its key is no valid label key."""


def _nameless(term: SelectorTerm) -> SelectorTerm:
    """The term as a volume's node affinity is matched: against the node's labels alone
    (``CheckNodeAffinity`` makes a node of labels without a name), so a ``matchFields``
    requirement sees the name ``""``: one it holds for is met, else the term never is."""
    if not term.match_fields:
        return term
    if not all(_met_by_no_name(r) for r in term.match_fields):
        return SelectorTerm()  # matches nothing
    return SelectorTerm(match_expressions=(*term.match_expressions, _ALWAYS))


def _met_by_no_name(requirement: SelectorRequirement) -> bool:
    """A field requirement against a node whose every field reads ``""``."""
    if requirement.operator not in ("In", "NotIn") or len(requirement.values) != 1:
        return False
    return (requirement.values[0] == "") == (requirement.operator == "In")


def _provision_terms(claim: Claim, storage_class: StorageClassSpec, storage: Storage) -> list[
    tuple[SelectorTerm, ...]
]:
    """Where a WaitForFirstConsumer claim can be provisioned: the node it was already
    given (its volume is being made there, so the room it took is not looked for
    again), else where its class allows and its driver publishes room for it."""
    if claim.selected_node is not None:
        return [(_on_node(claim.selected_node),)]
    found = [storage_class.allowed_topologies] if storage_class.allowed_topologies else []
    driver = storage.csi_drivers.get(storage_class.provisioner)
    if claim.storage is not None and driver is not None and driver.storage_capacity:
        found.append(_capacity_terms(claim.storage, storage_class.name, storage.capacities))
    return found


_NO_CAPACITY = SelectorTerm(match_expressions=(SelectorRequirement(CAPACITY_KEY, "Exists", ()),))
"""Matches no node: no capacity is published where the claim fits."""


def _capacity_terms(size: int, class_name: str, capacities: Mapping[str, StorageCapacity],
                    ) -> tuple[SelectorTerm, ...]:
    """The nodes some CSIStorageCapacity of the class reaches with room for ``size`` bytes
    (its ``maximumVolumeSize``, else its ``capacity``), as VolumeBinding's capacity check
    reads them: each claim alone, in whichever namespace the object is."""
    mark = SelectorRequirement(CAPACITY_KEY, "DoesNotExist", ())
    terms = tuple(dict.fromkeys(
        SelectorTerm(match_expressions=(mark, *capacity.topology.match_expressions))
        for capacity in capacities.values()
        if capacity.storage_class == class_name and capacity.topology is not None
        and capacity.size is not None and capacity.size >= size))
    return terms or (_NO_CAPACITY,)


def _on_node(node: NodeName) -> SelectorTerm:
    return SelectorTerm(match_fields=(SelectorRequirement("metadata.name", "In", (node,)),))
