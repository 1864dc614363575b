"""Gangs that must land inside one topology domain: nodes sharing a label's value.

Kubernetes 1.37's native PodGroup says this with
``schedulingConstraints.topology[].key``: a training job whose workers talk
over a fast fabric is useless when half of it sits in another rack. The gang
is placed whole inside one domain or not at all; among the domains that can
hold it, the one left with the least free room after it is chosen, so the
emptier domains stay whole for the next large gang.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from gangsched.core.model import Gang, NodeName, Policy
from gangsched.core.placement import Capacity, Decision, Placement, Snapshot, Unplaceable
from gangsched.core.reasons import BoundAcrossDomains, InDomain, NoDomainHolds, NoDomainLabel
from gangsched.core.resources import Resources, devices_first

__all__ = ["Domain", "domains_of", "place_in_one_domain"]

Domain = tuple[tuple[str, str], ...]
"""The label values that name a domain, one pair per topology key."""

REASON_DOMAINS = 3
"""Domains named in a reason when none fits; more would bury the line."""


def domains_of(snapshot: Snapshot, keys: Sequence[str]) -> dict[Domain, tuple[NodeName, ...]]:
    """Nodes by the values they carry for every key; a node missing a key is in no domain."""
    found: dict[Domain, list[NodeName]] = {}
    for name in sorted(snapshot.nodes):
        labels = dict(snapshot.nodes[name].node.labels)
        if all(key in labels for key in keys):
            domain = tuple((key, labels[key]) for key in keys)
            found.setdefault(domain, []).append(name)
    return {domain: tuple(names) for domain, names in found.items()}


def describe_domain(domain: Domain) -> str:
    return ",".join(f"{key}={value}" for key, value in domain)


def _confined(gang: Gang, domain: Domain) -> Gang:
    """The gang with every pending pod's node selector narrowed to the domain."""
    pods = tuple(
        replace(pod, rules=replace(
            pod.rules, node_selector=tuple(sorted({*pod.rules.node_selector, *domain})),
        ))
        for pod in gang.pending
    )
    return replace(gang, pending=pods)


def _leftover(
    capacity: Capacity, nodes: Sequence[NodeName], names: Sequence[str]
) -> tuple[int, ...]:
    """Free room left in the domain, scarcest resource first: the waste to minimise."""
    total = Resources.zero()
    for node in nodes:
        total = total + capacity.free(node)
    return tuple(total.get(name) for name in names)


def place_in_one_domain(
    capacity: Capacity,
    gang: Gang,
    policy: Policy,
    domains: Mapping[Domain, tuple[NodeName, ...]],
) -> Decision:
    """Place the gang whole inside the domain it wastes least of, or say why none holds it.

    Each domain is tried on the capacity and released again, so the answer
    consumes only the chosen domain's room, exactly as a plain placement
    would. A gang with members already bound stays in their domain.
    """
    keys = gang.topology_keys
    candidates = {
        domain: nodes for domain, nodes in domains.items()
        if gang.bound_on <= set(nodes)
    }
    label = "/".join(keys)
    if not domains:
        return Unplaceable(gang.key, NoDomainLabel(gang.key, label))
    if not candidates:
        return Unplaceable(gang.key, BoundAcrossDomains(gang.key, label))
    names = sorted({name for pod in gang.pending for name in pod.requests.amounts},
                   key=devices_first)
    best: tuple[tuple[int, ...], Domain] | None = None
    refusals: list[InDomain] = []
    for domain in sorted(candidates):
        decision = capacity.place(_confined(gang, domain), policy)
        if isinstance(decision, Unplaceable):
            refusals.append(InDomain(describe_domain(domain), decision.reason))
            continue
        waste = _leftover(capacity, candidates[domain], names)
        capacity.release(decision)
        if best is None or waste < best[0]:
            best = (waste, domain)
    if best is None:
        return Unplaceable(gang.key, NoDomainHolds(label, len(candidates),
                                                   tuple(refusals[:REASON_DOMAINS])))
    placed = capacity.place(_confined(gang, best[1]), policy)
    if not isinstance(placed, Placement):  # the domain held it a moment ago
        raise AssertionError(f"domain {describe_domain(best[1])} refused gang {gang.key} twice")
    return placed
