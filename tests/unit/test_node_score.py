"""One node preference for every search: a gang lands where its policy says, whichever
search places it (plain pods, pods under inter-pod rules, pods claiming devices)."""

from __future__ import annotations

from gangsched.core.model.objects import Policy
from gangsched.core.placement.capacity import Capacity, Placement
from tests.unit.clusters import gang
from tests.unit.test_dra import claim_obj, claiming, held_by, request, snapshot

# Eight fake GPUs a node; the claims of other pods hold 6 on n-0, 1 on n-1, 4 on n-2.
HELD = [claim_obj("h-0", status=held_by("n-0", range(6), "x-0")),
        claim_obj("h-1", status=held_by("n-1", [0], "x-1")),
        claim_obj("h-2", status=held_by("n-2", range(4), "x-2"))]
NODES = ["n-0", "n-1", "n-2"]


def nodes_of(policy: Policy, members: int) -> list[str]:
    claims = [*HELD, *(claim_obj(f"c-{i}", request(count=1)) for i in range(members))]
    pods = [claiming(f"ns/w-{i}", f"c-{i}") for i in range(members)]
    decision = Capacity(snapshot(NODES, claims)).place(gang("ns/g", pods), policy)
    assert isinstance(decision, Placement)
    return [node for _, node in decision.assignments]


def test_a_spread_gang_claiming_gpus_goes_to_the_nodes_with_most_gpus_free() -> None:
    """LeastAllocated, as kube-scheduler's spread scoring: the emptiest nodes first."""
    assert nodes_of(Policy.SPREAD, 2) == ["n-1", "n-2"]


def test_a_spread_gang_claiming_gpus_puts_its_fourth_member_beside_the_fewest() -> None:
    """Every node has one member: the next goes where the gang has fewest, most free."""
    assert sorted(nodes_of(Policy.SPREAD, 4)) == ["n-0", "n-1", "n-1", "n-2"]


def test_a_binpacked_gang_claiming_gpus_fills_the_fullest_node_first() -> None:
    """MostAllocated: the node with fewest GPUs free that holds the gang, joined."""
    assert nodes_of(Policy.BINPACK, 2) == ["n-0", "n-0"]
