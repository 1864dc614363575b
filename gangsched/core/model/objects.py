"""The plain data the scheduling core reasons about.

Everything here is frozen and built once at the edge (``gangsched.core.kubeobjects``
turns API objects into these), so a cycle can share them freely and a snapshot
can never be torn by a watch event arriving mid-cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NewType

from gangsched.core.model.resources import Capability, Resources

NodeName = NewType("NodeName", str)
PodKey = NewType("PodKey", str)
"""``namespace/name`` of a pod."""
GangKey = NewType("GangKey", str)
"""``namespace/group`` of a PodGroup; a pod with no group is ``namespace/pod:<name>``."""
QueueName = NewType("QueueName", str)

DEFAULT_QUEUE = QueueName("default")
"""The queue every gang without one goes to; it exists without anyone creating it."""


def gang_key(namespace: str, group: str) -> GangKey:
    return GangKey(f"{namespace}/{group}")


def solo_gang_key(pod: PodKey) -> GangKey:
    """A pod without a group is a gang of one; the prefix keeps it apart from group names."""
    namespace, name = pod.split("/", 1)
    return GangKey(f"{namespace}/pod:{name}")


class Flavor(StrEnum):
    """Which API a PodGroup came from; status is written back in that API's shape."""

    GANGSCHED = "scheduling.gangsched.io/v1alpha1"
    COSCHEDULING = "scheduling.x-k8s.io/v1alpha1"
    VOLCANO = "scheduling.volcano.sh/v1beta1"
    NATIVE = "scheduling.k8s.io/v1beta1"

    @property
    def group(self) -> str:
        return self.value.split("/")[0]

    @property
    def version(self) -> str:
        return self.value.split("/")[1]


class Policy(StrEnum):
    """How members of a gang are spread over nodes."""

    BINPACK = "binpack"
    SPREAD = "spread"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str  # empty with operator Exists tolerates every taint
    operator: str  # Equal or Exists
    value: str
    effect: str  # empty matches every effect


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    """One requirement of a node selector term (matchExpressions or matchFields)."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """Terms are ORed; the requirements inside one term are ANDed."""

    match_expressions: tuple[SelectorRequirement, ...] = ()
    match_fields: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class Node:
    name: NodeName
    allocatable: Resources
    labels: tuple[tuple[str, str], ...] = ()
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    """The Ready condition: what queue shares count, never what fit reads (kube-scheduler
    reads only the taints a node not Ready is given)."""
    features: frozenset[str] = frozenset()
    """``status.declaredFeatures``: what the node's kubelet says it supports."""
    created: float = 0.0
    """Creation time in seconds since the epoch: a node an autoscaler made after a gang
    asked for nodes is held for that gang (core.asking)."""


@dataclass(frozen=True, slots=True)
class PodPlacementRules:
    """What restricts the nodes a pod may go to; identical rules share fit results."""

    node_selector: tuple[tuple[str, str], ...] = ()
    required_affinity: tuple[SelectorTerm, ...] = ()  # empty: no restriction
    tolerations: tuple[Toleration, ...] = ()
    volume_affinity: tuple[tuple[SelectorTerm, ...], ...] = ()
    """Node restrictions of the pod's volumes (a bound volume's node affinity and zone,
    a provisioner's allowed topologies): each entry is a set of terms ORed, and every
    entry must hold, as VolumeBinding and VolumeZone check them beside NodeAffinity."""
    features: frozenset[str] = frozenset()
    """Node features the pod's spec needs (NodeDeclaredFeatures): a node must declare
    every one."""


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """Which pods a required inter-pod (anti-)affinity term selects.

    ``matchLabelKeys`` and ``mismatchLabelKeys`` are folded into
    ``match_expressions`` when read, since they depend only on the labels of
    the pod carrying the term.
    """

    topology_key: str
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()
    selects_pods: bool = True
    """False for a term without a ``labelSelector``: it selects no pod at all."""
    namespaces: tuple[str, ...] = ()
    """The namespaces listed (the carrying pod's own when neither ``namespaces`` nor a
    ``namespaceSelector`` is given), with those its ``namespaceSelector`` selects once
    resolved (:func:`gangsched.core.fit.namespaces.resolve_pod`)."""
    any_namespace: bool = False
    """An empty ``namespaceSelector``: the term selects pods of every namespace."""
    namespace_selector: NamespaceSelector | None = None
    """A non-empty ``namespaceSelector``: which namespaces it selects depends on their
    labels, so it is resolved into ``namespaces`` wherever those labels are known."""
    listed: tuple[str, ...] = ()
    """The namespaces the term lists itself, kept apart so resolving again, after a
    namespace's labels change, starts from them."""


@dataclass(frozen=True, slots=True)
class Namespace:
    """A Namespace as inter-pod terms read it: its name and labels."""

    name: str
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class NamespaceSelector:
    """A ``namespaceSelector`` of an inter-pod term: namespaces by their labels."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    """A ``preferredDuringSchedulingIgnoredDuringExecution`` pod (anti-)affinity term: it
    only ranks nodes, by ``weight`` per matching pod in the domain."""

    weight: int
    term: PodAffinityTerm
    anti: bool = False


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A ``topologySpreadConstraints`` entry with ``whenUnsatisfiable: DoNotSchedule``.

    ``matchLabelKeys`` are folded into ``match_expressions`` when read, as
    kube-scheduler merges them into the selector; the pods counted are those
    of the carrying pod's namespace.
    """

    max_skew: int
    topology_key: str
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()
    selects_pods: bool = True
    """False without a ``labelSelector``: no pod matches, the pod itself included."""
    min_domains: int = 1
    honour_node_affinity: bool = True
    """``nodeAffinityPolicy: Honor`` (the default): only nodes the pod's node selector and
    required node affinity admit are counted as domains."""
    honour_taints: bool = False
    """``nodeTaintsPolicy: Honor``: nodes with taints the pod does not tolerate are not counted
    (the default, Ignore, counts them)."""


ClaimKey = NewType("ClaimKey", str)
"""``namespace/name`` of a ResourceClaim."""


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One entry of a pod's ``spec.resourceClaims``: the claim it names, or the template
    the resource-claim controller makes its claim from (None until that claim exists)."""

    name: str
    claim: ClaimKey | None
    template: str | None = None


@dataclass(frozen=True, slots=True)
class ExtendedRequest:
    """A container's request of an extended resource (``example.com/gpu: 2``), kept per
    container: where no node lists the resource but a DeviceClass names it, devices of
    that class serve it, through a claim made for the pod with one request per
    container, named after the container's place and the resource's, as kube-scheduler
    names them."""

    container: str
    index: int
    """The container's place among the init containers, then the containers."""
    resource: str
    slot: int
    """The resource's place among the container's requests, sorted by name."""
    count: int
    init: bool = False
    """An init container that runs to completion before the others start (no sidecar):
    it may use devices asked for by the containers after it."""


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A volume of a pod that a PersistentVolumeClaim backs, in the pod's namespace."""

    name: str
    ephemeral: bool = False
    """A generic ephemeral volume: the claim is ``<pod>-<volume>``, made for the pod by the
    ephemeral-volume controller, and must be owned by it."""


class VolumeProblem(StrEnum):
    """Why a pod's claim keeps it off every node, as VolumeBinding, VolumeZone and
    VolumeRestrictions of kube-scheduler refuse it."""

    INVALID_NAME = "is not a valid claim name, so no claim can ever have it"
    MISSING = "does not exist"
    EPHEMERAL_MISSING = "does not exist yet (the ephemeral-volume controller creates it)"
    NOT_OWNED = "was not created for this pod"
    DELETING = "is being deleted"
    LOST = "is bound to a PersistentVolume that no longer exists"
    VOLUME_MISSING = "is bound to a PersistentVolume that gangsched has not seen"
    UNBOUND_IMMEDIATE = "is not bound yet and its storage class binds immediately"
    CLASS_MISSING = "names a storage class that does not exist"
    NO_PROVISIONER = "waits for its first consumer, but its storage class has no provisioner"
    IN_USE = "is ReadWriteOncePod and already in use by another pod"
    SHARED_IN_GANG = "is ReadWriteOncePod and used by another pending pod of the gang"


@dataclass(frozen=True, slots=True)
class VolumeBlock:
    """The first claim of a pod that keeps it off every node, and why."""

    claim: str
    """``namespace/name``."""
    problem: VolumeProblem
    other: str = ""
    """The pod that holds a ReadWriteOncePod claim, when that is the problem."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A PersistentVolumeClaim as placement reads it."""

    key: str
    """``namespace/name``."""
    storage_class: str = ""
    """Empty: no class (``""`` or unset and no default given by the API server)."""
    volume_name: str = ""
    bound: bool = False
    """Bound to ``volume_name`` and the bind completed (``pv.kubernetes.io/bind-completed``)."""
    selected_node: NodeName | None = None
    """``volume.kubernetes.io/selected-node``: where a WaitForFirstConsumer claim is provisioned."""
    access_modes: tuple[str, ...] = ()
    lost: bool = False
    deleting: bool = False
    owners: tuple[str, ...] = ()
    """UIDs of its controlling owners: a pod's generic ephemeral claim names the pod."""
    storage: int | None = None
    """``spec.resources.requests.storage`` in bytes; None when it asks no size."""


@dataclass(frozen=True, slots=True, order=True)
class AttachedVolume:
    """A volume a CSI driver attaches to a node, as NodeVolumeLimits counts it: one per
    ``driver/handle``, however many pods use it."""

    driver: str
    handle: str
    migrated: bool = False
    """An in-tree volume of a plugin migrated to CSI (EBS, PD, Azure Disk, Cinder,
    Portworx), counted as its CSI driver's only on nodes that have a CSINode."""


@dataclass(frozen=True, slots=True)
class Volume:
    """A PersistentVolume: where its data can be reached from."""

    name: str
    node_affinity: tuple[SelectorTerm, ...] | None = None
    """``spec.nodeAffinity.required`` terms (ORed); None: any node."""
    zones: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Its zone and region labels, each with the values it lists (``a__b``: either)."""
    attached: AttachedVolume | None = None
    """Its CSI driver and handle (an in-tree source translated); None for a volume no CSI
    driver attaches (hostPath, local, NFS...), which no node limit counts."""
    csi: bool = False
    """Its source is ``spec.csi`` itself: only such a volume counts through a
    VolumeAttachment naming it."""


@dataclass(frozen=True, slots=True)
class CsiNode:
    """A CSINode: the CSI drivers registered on a node and how many volumes each may
    attach there (``allocatable.count``; a driver without one is not limited)."""

    node: NodeName
    drivers: tuple[str, ...] = ()
    limits: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class VolumeAttachmentSpec:
    """A VolumeAttachment: a PersistentVolume an attacher holds on a node, whether or
    not a pod there still uses it."""

    name: str
    node: NodeName
    attacher: str
    volume: str
    """The PersistentVolume's name; empty for an inline volume's attachment."""


@dataclass(frozen=True, slots=True)
class VolumeLimits:
    """What the pending pods' volumes ask of one cycle's nodes (core.placement.volumelimits)."""

    drivers: frozenset[str] = frozenset()
    """Drivers some node limits and some pending pod uses: resources of the cycle."""
    labelled: frozenset[str] = frozenset()
    """Drivers pending pods need registered on their node: labels of the cycle's nodes."""

    def __bool__(self) -> bool:
        return bool(self.drivers or self.labelled)


@dataclass(frozen=True, slots=True)
class CsiDriver:
    """A CSIDriver, as far as scheduling reads it."""

    name: str
    required_on_node: bool = False
    """``spec.preventPodSchedulingIfMissing``: a pod using it goes only to nodes whose
    CSINode lists it."""
    storage_capacity: bool = False
    """``spec.storageCapacity``: it publishes CSIStorageCapacity objects, and a claim it
    would provision goes only where one says there is room for it."""


@dataclass(frozen=True, slots=True)
class StorageCapacity:
    """A CSIStorageCapacity: how large a volume of a class its driver can still make for
    the nodes its topology selects."""

    key: str
    """``namespace/name``: the namespace says nothing, the class and topology say all."""
    storage_class: str
    topology: SelectorTerm | None
    """``nodeTopology`` as a node term (``matchLabels`` as In requirements); None: unset,
    so no node reaches it."""
    size: int | None
    """``maximumVolumeSize``, else ``capacity``, in bytes; None: neither is published."""


@dataclass(frozen=True, slots=True)
class StorageClassSpec:
    name: str
    provisioner: str = ""
    wait_for_first_consumer: bool = False
    allowed_topologies: tuple[SelectorTerm, ...] = ()
    """Terms ORed; empty: the provisioner can serve any node."""


@dataclass(frozen=True, slots=True)
class GroupClaim:
    """One entry of a native PodGroup's ``spec.resourceClaims``. A member's own claim of
    the same name naming the same claim or template is the group's claim, shared by
    every member and reserved for the PodGroup rather than for each pod."""

    name: str
    claim: str | None = None
    template: str | None = None

    def matches(self, claim: PodClaim) -> bool:
        if claim.name != self.name:
            return False
        if self.template is not None:
            return claim.template == self.template
        return claim.template is None and claim.claim is not None and (
            claim.claim.split("/", 1)[1] == self.claim)


@dataclass(frozen=True, slots=True)
class Pod:
    key: PodKey
    requests: Resources
    """Effective request as kube-scheduler computes it, including the pod count."""
    rules: PodPlacementRules = field(default_factory=PodPlacementRules)
    node_name: NodeName | None = None
    priority: int = 0
    created: float = 0.0
    """Creation time in seconds since the epoch; orders pods of equal priority."""
    gang: GangKey | None = None
    terminal: bool = False
    """Succeeded or Failed: holds no resources on its node."""
    terminating: bool = False
    """Has a ``deletionTimestamp``: it still holds its node's room until it is gone, as
    kube-scheduler counts it, but it is no member of its gang any more and is never placed."""
    gates: tuple[str, ...] = ()
    """Names of its ``spec.schedulingGates``: while any remain the pod may not be bound."""
    queue: QueueName | None = None
    """Its ``scheduling.gangsched.io/queue`` annotation: the queue whose gang of one it is
    when it names no PodGroup (a group's pods are in their group's queue)."""
    preempts: bool = True
    """False for ``spec.preemptionPolicy: Never`` (set from its PriorityClass): the pod
    waits for room rather than taking it from lower priorities."""
    labels: tuple[tuple[str, str], ...] = ()
    sub_group: str | None = None
    """The sub-group of its PodGroup's ``spec.topology`` its label names, read once."""
    anti_affinity: tuple[PodAffinityTerm, ...] = ()
    """Its required anti-affinity terms, which keep other pods away from it."""
    claims: tuple[ClaimRef, ...] = ()
    """Its volumes backed by PersistentVolumeClaims, in spec order."""
    volume_block: VolumeBlock | None = None
    """Set each cycle from the claims: the claim that keeps the pod off every node."""
    unbound_claims: tuple[str, ...] = ()
    """Set each cycle from the claims: its WaitForFirstConsumer claims not bound yet
    (``namespace/name``), which must be provisioned on its node before it is bound."""
    sole_claims: tuple[str, ...] = ()
    """Set each cycle from the claims: its ReadWriteOncePod claims (``namespace/name``),
    which no other pod placed in the same cycle may use."""
    affinity: tuple[PodAffinityTerm, ...] = ()
    """Its required pod affinity terms: it goes only where pods they select run."""
    spread: tuple[SpreadConstraint, ...] = ()
    """Its ``DoNotSchedule`` topology spread constraints."""
    preferred: tuple[PreferredTerm, ...] = ()
    """Its preferred pod affinity and anti-affinity terms, which only rank nodes."""
    soft_spread: tuple[SpreadConstraint, ...] = ()
    """Its ``ScheduleAnyway`` spread constraints, which only rank nodes."""
    resource_claims: tuple[PodClaim, ...] = ()
    """Its ResourceClaims (dynamic resource allocation): placed with their devices."""
    uid: str = ""
    """The pod's UID, which a claim's ``reservedFor`` names."""
    extended_requests: tuple[ExtendedRequest, ...] = ()
    """Its containers' requests of extended resources, which devices may serve."""
    inline_volumes: tuple[AttachedVolume, ...] = ()
    """Its inline in-tree volumes of plugins migrated to CSI (``awsElasticBlockStore``...),
    which count against their driver's node limit as claims' volumes do."""
    expected_runtime: float | None = None
    """Seconds it is expected to run once started, from its
    ``scheduling.gangsched.io/expected-runtime`` annotation (core.model.runtimes)."""
    active_deadline: float | None = None
    """``spec.activeDeadlineSeconds``: the kubelet ends it this long after it started."""
    started: float | None = None
    """``status.startTime``, once the kubelet has started it."""
    runtime_problem: str | None = None
    """Why its expected-runtime annotation was not read (negative, not a duration)."""

    @property
    def namespace(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def has_pod_rules(self) -> bool:
        """Whether where it may go, or where it would rather go, depends on the pods
        already there."""
        return bool(self.affinity or self.anti_affinity or self.spread or self.preferred
                    or self.soft_spread)

    def on_node(self, node: NodeName) -> Pod:
        """The pod as placed on ``node``.

        Copied slot by slot: ``dataclasses.replace`` passes every field through the
        frozen ``__init__``, and over a backlog of thousands of pods that copy alone
        was a fifth of the placing cycle.
        """
        placed = object.__new__(Pod)
        for name in _POD_SLOTS:
            object.__setattr__(placed, name, getattr(self, name))
        object.__setattr__(placed, "node_name", node)
        return placed


_POD_SLOTS: tuple[str, ...] = Pod.__slots__


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    """A PodDisruptionBudget as preemption reads it: the pods it guards, and how many of
    them may go now.

    ``disruptions_allowed`` is the disruption controller's figure: every pod it
    selects that an eviction takes spends one, so a set of victims is decided
    against it whole before the first eviction, never pod by pod.
    """

    key: str
    """``namespace/name``."""
    namespace: str
    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()
    selects_pods: bool = True
    """False for a budget without a selector: in ``policy/v1`` it selects no pod."""
    disruptions_allowed: int = 0
    group_uid: str = ""
    """The UID of the PodGroup that owns it (a running gang's own budget, which guards
    it against losing members one by one, not against being preempted whole)."""


@dataclass(frozen=True, slots=True)
class NodePool:
    """A Karpenter NodePool as asking for nodes reads it: how much more it may launch, and
    what nodes it makes (its template's labels and requirements)."""

    name: str
    headroom: tuple[tuple[str, int], ...] | None = None
    """``spec.limits`` less ``status.resources``, per resource limited, never below zero;
    None: no limits."""
    labels: tuple[tuple[str, str], ...] = ()
    requirements: tuple[SelectorRequirement, ...] = ()

    def holds(self, need: Resources, taken: Resources | None = None) -> bool:
        """Whether ``need`` stays within its headroom, with ``taken`` of it given already."""
        if self.headroom is None:
            return True
        used = need if taken is None else need + taken
        return all(used.get(name) <= left for name, left in self.headroom)


@dataclass(frozen=True, slots=True)
class SubGroup:
    """One of ``spec.topology.subGroups``: the members whose pods carry its name in the
    sub-group label, at least ``min_member`` of them placed with the gang, all inside one
    domain of ``required`` (and of ``preferred`` where one holds them)."""

    name: str
    min_member: int = 1
    required: str | None = None
    preferred: str | None = None


@dataclass(frozen=True, slots=True)
class LevelRequest:
    """A gangsched PodGroup's ``spec.topology``: the levels of a Topology, by node label, the
    gang must (``required``) or should (``preferred``) keep to one domain of, and its
    sub-groups, each kept to a domain of its own inside the gang's."""

    topology: str
    required: str | None = None
    preferred: str | None = None
    levels: tuple[str, ...] | None = None
    """The named Topology's levels, widest first, as the cycle found them; None: no such
    Topology (or not looked up yet)."""
    sub_groups: tuple[SubGroup, ...] = ()
    preferred_wait_s: int = 0
    """Seconds the gang, once it began waiting, keeps waiting for one domain of its
    preferred level rather than take a wider one that holds it now."""


@dataclass(frozen=True, slots=True)
class Gang:
    """A group of pods placed all-or-nothing.

    ``pending`` are the members waiting for a node; ``bound`` members already
    have one and count toward ``min_member``.
    """

    key: GangKey
    min_member: int
    pending: tuple[Pod, ...]
    bound: int = 0
    queue: QueueName = DEFAULT_QUEUE
    min_resources: Resources = field(default_factory=Resources.zero)
    priority: int = 0
    created: float = 0.0
    policy: Policy | None = None
    """Overrides the scheduler's policy for this gang when set."""
    topology_keys: tuple[str, ...] = ()
    """Node labels whose values every member must share: the gang lands in one domain."""
    levels: LevelRequest | None = None
    """Its PodGroup's Topology levels (core.placement.topology): a required one sets
    ``topology_keys``."""
    bound_on: frozenset[NodeName] = frozenset()
    """Nodes the gang's bound members run on: a topology gang's domain is theirs."""
    bound_in: tuple[tuple[str, NodeName], ...] = ()
    """The sub-group and node of each bound member in one: a sub-group's domain is theirs."""
    preempts: bool = True
    """May evict gangs of lower priority to make room (no ``preemptionPolicy: Never``)."""
    preemptible: bool = True
    """May be evicted, whole, for a gang of higher priority (no opt-out annotation). Reclaim
    does not read it: only its Queue's ``reclaimable`` keeps a gang from being reclaimed."""
    group_claims: tuple[GroupClaim, ...] = ()
    """Its native PodGroup's ``spec.resourceClaims``: the members' claims that match one
    are the group's, allocated once and reserved for the PodGroup."""
    group_uid: str = ""
    """The PodGroup's UID, which those claims' ``reservedFor`` names."""
    expected_runtime: float | None = None
    """Seconds its PodGroup's expected-runtime annotation says its members run; a
    member's own annotation or deadline says more (core.model.runtimes)."""
    claimed: Resources = field(default_factory=Resources.zero)
    """The devices its pending pods' ResourceClaims will take, beyond the claims its bound
    pods hold already, under the ledger's names (core.dra.usage)."""
    kueue_workload: str | None = None
    """``namespace/name`` of the Kueue Workload, not admitted yet, that owns its PodGroup's
    job: Kueue decides when the gang may start, and until then it is neither admitted
    nor tried (core.stages.triage)."""


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """What the cycle needs of a Queue: its weight, its cap, whether it takes new gangs.

    ``capability`` caps only the resources it names (a zero forbids that
    resource); a resource it does not name is not limited, as in Volcano.
    """

    name: QueueName
    weight: int = 1
    capability: Capability | None = None
    open: bool = True
    error: str | None = None
    """What of the spec was left out as unreadable (the schema should have rejected it)."""
    parent: QueueName | None = None
    """The queue whose share and cap this one's are parts of (see core.queues.hierarchy)."""
    reclaimable: bool = True
    """Whether a queue under its deserved share may evict this queue's gangs to take back
    room it borrowed (see core.stages.reclaim)."""


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """A PodGroup of any flavour, reduced to what a scheduling decision reads."""

    key: GangKey
    flavor: Flavor
    min_member: int
    min_resources: Resources
    queue: QueueName
    created: float
    generation: int = 0
    timeout_seconds: int | None = None
    priority_class: str | None = None
    priority: int | None = None
    """A priority value given on the group itself (native ``spec.priority``)."""
    basic: bool = False
    """Native ``schedulingPolicy.basic``: each pod is placed on its own, the group only
    counts and reports them."""
    topology_keys: tuple[str, ...] = ()
    """Node labels every member must share one value of (native topology constraints)."""
    topology: LevelRequest | None = None
    """A gangsched PodGroup's ``spec.topology``."""
    workload: str | None = None
    """``namespace/name`` of the native Workload whose queue annotation applies when the
    PodGroup names none itself."""
    preempts: bool = True
    """False for native ``spec.preemptionPolicy: Never``: the gang waits for room."""
    preemptible: bool = True
    """False when an annotation of ``PREEMPTIBLE_ANNOTATIONS`` (core.kubeobjects) says
    ``"false"``."""
    resource_claims: tuple[GroupClaim, ...] = ()
    """Native ``spec.resourceClaims``: claims the group's pods share."""
    uid: str = ""
    expected_runtime: float | None = None
    """Its ``scheduling.gangsched.io/expected-runtime`` annotation, in seconds."""
    runtime_problem: str | None = None
    """Why that annotation was not read: the group is scheduled as if it had none."""
    owners: tuple[str, ...] = ()
    """UIDs of its owners (``metadata.ownerReferences``): a job whose admission another
    controller, such as Kueue, decides."""
    kueue_workload: str | None = None
    """The Kueue Workload of one of its owners while Kueue has not admitted it
    (``namespace/name``), set by the mirror from the Workloads it watches."""
    parent: str | None = None
    """A native PodGroup's ``spec.parentCompositePodGroupName``: the CompositePodGroup, in
    its namespace, that may place it together with its siblings."""
    composite: GangKey | None = None
    """The gang of its gang-policy CompositePodGroup that places it whole with its siblings
    (core.kubeobjects.composites): its status is that gang's."""
    parts: tuple[GangKey, ...] = ()
    """Of a CompositePodGroup's gang: the child PodGroups it places, whose status it writes
    (it has no PodGroup of its own)."""


@dataclass(frozen=True, slots=True)
class MemberCounts:
    """Members of one group by state; ``scheduled`` counts pods with a node, assumed or bound."""

    pending: int = 0
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
