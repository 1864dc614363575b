"""How much a node is wanted for a gang's next pod: the one node preference of every search.

Modelled on kube-scheduler's NodeResourcesFit score: MostAllocated (our
binpack) wants the node its requests would leave fullest, LeastAllocated
(spread) the emptiest, each resource weighed. Here fullness is counted in the
pod's own terms: ``room`` is how many more such pods the node holds, which is
its scarcest resource as the pod asks it (each resource weighed by what the pod
asks of it), and fewer is fuller; where the pod's devices are the scarce thing
(:mod:`gangsched.core.dra`), the devices the node has free. Before it, the
devices of a kind the pod does not use that it would strand (a whole GPU node
taken by a CPU pod), which neither policy wants; and the gang's own nodes,
which binpack joins (fewer nodes for the gang) and spread avoids (a member per
node, then the fewest, so one node's failure costs it least).

The greedy passes (:mod:`gangsched.core.placement.policies`), the exhaustive
search (:mod:`~gangsched.core.placement.packing`), the search under inter-pod
rules (:mod:`~gangsched.core.placement.rulesearch`) and the device search
(:mod:`gangsched.core.dra.placing`) all rank nodes by :func:`node_score`.
"""

from __future__ import annotations

from gangsched.core.model.objects import Policy

Score = tuple[int, int, int]


def node_score(policy: Policy, used: int, room: int, stranded: int = 0) -> Score:
    """The node's rank for a pod, lowest first: ``used`` members of the gang are on it
    already, it holds ``room`` more such pods, placing there strands ``stranded`` devices."""
    if policy is Policy.SPREAD:
        return (stranded, used, -room)
    return (stranded, -min(used, 1), room)


def joins_gang(policy: Policy) -> bool:
    """Whether a node the gang uses goes before an alike one it does not (binpack)."""
    return node_score(policy, 1, 0) < node_score(policy, 0, 0)
