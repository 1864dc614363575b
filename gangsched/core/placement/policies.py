"""The two placement policies over free nodes, and what the nodes offer a kind of pod.

Binpack fills the fewest nodes, tightest fit first, so whole nodes stay
whole for the big gangs behind; spread puts a gang's pods on as many nodes
as it can. Both place a run of identical pods at a time on a
:class:`~gangsched.core.placement.shapes.FreeNodes`, consuming as they go; the caller
(:class:`~gangsched.core.placement.capacity.Capacity`) wraps them in a transaction.
These are the only binpack and spread passes: the exhaustive search and the
inter-pod rules hand the pods beyond a gang's minimum back to them; all of
them rank nodes by the one node preference,
:func:`gangsched.core.fit.score.node_score`.
"""

from __future__ import annotations

from gangsched.core.fit.nodefit import uses_node_name
from gangsched.core.fit.score import node_score
from gangsched.core.model.objects import NodeName, Pod, Policy
from gangsched.core.model.resources import volume_driver
from gangsched.core.placement.packing import PodType
from gangsched.core.placement.room import fit_count
from gangsched.core.placement.shapes import ClassKey, FreeNodes, ShapeIndex
from gangsched.core.reasons import ShapeFigures, VolumeLimitBound

__all__ = ["allowed_nodes", "greedy", "shape_figures"]


def greedy(
    nodes: FreeNodes,
    runs: list[tuple[PodType, list[Pod]]],
    policy: Policy,
    mine: dict[NodeName, int],
) -> list[tuple[Pod, NodeName]]:
    """Place every pod that fits, run by run, consuming as it goes.

    ``mine`` counts the gang's pods per node so far; the policy reads it
    (binpack joins them, spread avoids them) and each run adds to it.
    """
    placed: list[tuple[Pod, NodeName]] = []
    for kind, pods in runs:
        if not pods:
            continue
        shape = nodes.shape(kind.requests, kind.rules)
        if policy is Policy.SPREAD:
            _spread_run(nodes, shape, pods, placed, mine)
        else:
            _binpack_run(nodes, shape, pods, placed, mine)
    return placed


def _binpack_run(
    nodes: FreeNodes,
    shape: ShapeIndex,
    pods: list[Pod],
    placed: list[tuple[Pod, NodeName]],
    mine: dict[NodeName, int],
) -> None:
    """Binpack: fewest nodes, tightest fit, no devices stranded.

    Each step fills one node with as many of the run as it takes, from
    the group :meth:`~gangsched.core.placement.shapes.ShapeIndex.best_for_binpack`
    names, joining a node the gang already uses where that group has one. So a run lands
    whole on the partly used node it fills exactly, and whole nodes
    (and GPU nodes, for pods that use no GPU) stay whole for the larger
    gangs behind it: binpacking is what keeps big gangs placeable.
    """
    position = 0
    while position < len(pods):
        group = shape.best_for_binpack(len(pods) - position)
        if group is None:
            return
        take = min(shape.room(group[1]), len(pods) - position)
        node = _member(nodes, shape, group, mine)
        nodes.move(node, nodes.free[node] - shape.requests.scale(take))
        mine[node] = mine.get(node, 0) + take
        for pod in pods[position : position + take]:
            placed.append((pod, node))
        position += take


def _spread_run(
    nodes: FreeNodes,
    shape: ShapeIndex,
    pods: list[Pod],
    placed: list[tuple[Pod, NodeName]],
    mine: dict[NodeName, int],
) -> None:
    """Spread: as many nodes as possible, one pod per node the gang has not used yet.

    Nodes come in :meth:`~gangsched.core.placement.shapes.ShapeIndex.for_spread` order (no devices
    stranded, then the roomiest); only when no unused node has room
    does a node take another member, the one with fewest, then most
    room. A gang that asked for spread wants to lose as few members as
    possible to one node's failure. For a gang of one kind of pod it
    places as many members as binpack does: each node takes what fits
    either way.
    """
    free, kind_of = nodes.free, nodes.index.kind_of
    for pod in pods:
        node = _fresh_member(nodes, shape, mine)
        if node is None:
            candidates = [
                name for name in mine
                if shape.room(free[name]) and shape.admits(kind_of[name], name)
            ]
            if not candidates:
                return
            node = min(candidates, key=lambda name: node_score(
                Policy.SPREAD, mine[name], shape.room(free[name])))
        nodes.move(node, free[node] - shape.requests)
        mine[node] = mine.get(node, 0) + 1
        placed.append((pod, node))


def _fresh_member(
    nodes: FreeNodes, shape: ShapeIndex, mine: dict[NodeName, int]
) -> NodeName | None:
    classes = nodes.classes
    for kind, free in shape.for_spread():
        for name in classes[kind][free]:
            if name not in mine and shape.admits(kind, name):
                return name
    return None


def _member(
    nodes: FreeNodes, shape: ShapeIndex, group: ClassKey, mine: dict[NodeName, int]
) -> NodeName:
    """A node of the group the shape may use, one this gang already uses if there is
    one (fewer nodes)."""
    kind, free = group
    for name in mine:
        if (
            nodes.free[name] == free
            and nodes.index.kind_of[name] == kind
            and shape.admits(kind, name)
        ):
            return name
    return next(name for name in nodes.classes[kind][free] if shape.admits(kind, name))


def shape_figures(nodes: FreeNodes, kind: PodType) -> ShapeFigures:
    """Nodes by room for the kind, those short of room by resource, the rest by rule."""
    index = nodes.index
    excluded: dict[str, int] = {}
    if uses_node_name(kind.rules):
        for reason in index.name_reasons(kind.rules).values():
            if reason is not None:
                excluded[reason] = excluded.get(reason, 0) + 1
    else:
        for kind_id, reason in enumerate(index.kind_reasons(kind.rules)):
            if reason is not None:
                excluded[reason] = excluded.get(reason, 0) + index.kind_size[kind_id]
    room, short = nodes.shape(kind.requests, kind.rules).counts()
    limits = tuple(
        limit for name in kind.requests.names()
        if (limit := _volume_limit(nodes, kind, name)) is not None)
    return ShapeFigures(kind.requests, kind.rules, len(kind.pods), room, short, excluded,
                        limits)


def _volume_limit(nodes: FreeNodes, kind: PodType, name: str) -> VolumeLimitBound | None:
    """For a CSI driver's volumes (core.placement.volumelimits), the nodes the kind may use whose
    room the driver's limit holds below their other resources', and the nearest of them
    to taking one more pod; None when the limit holds none down."""
    driver = volume_driver(name)
    if driver is None:
        return None
    others = tuple(item for item in kind.items if item[0] != name)
    bound: list[tuple[int, int, NodeName]] = []
    for node in allowed_nodes(nodes, kind.pods[0]):
        free = nodes.free[node]
        room = fit_count(free, kind.items)
        if room < fit_count(free, others):
            bound.append((-room, -free.get(name), node))
    if not bound:
        return None
    node = min(bound)[2]
    limit = nodes.index.nodes[node].node.allocatable.get(name)
    return VolumeLimitBound(driver, len(bound), node, limit,
                            limit - nodes.free[node].get(name), kind.requests.get(name))


def allowed_nodes(nodes: FreeNodes, pod: Pod) -> list[NodeName]:
    """The nodes the pod's rules let it onto, however full they are."""
    index = nodes.index
    if uses_node_name(pod.rules):
        return [name for name, reason in index.name_reasons(pod.rules).items()
                if reason is None]
    reasons = index.kind_reasons(pod.rules)
    return [name for name in nodes.free if reasons[index.kind_of[name]] is None]
