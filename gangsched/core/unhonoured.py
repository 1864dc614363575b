"""Gangs held back by placement rules gangsched does not evaluate yet.

A pod is only ever bound where kube-scheduler would also put it: until a
rule (inter-pod affinity, a required spread, a claim-backed volume, a
resource claim) is honoured here, a gang with a pending member carrying one
waits whole and says which rule, instead of being bound against it.
"""

from __future__ import annotations

from gangsched.core.model import Gang
from gangsched.core.reasons import Unhonoured

__all__ = ["unhonoured_reason"]


def unhonoured_reason(gang: Gang) -> Unhonoured | None:
    """Why the gang waits for rules it carries, or None when it carries none.

    Placing the other members would split the gang around one that can
    never be bound safely, so the whole gang waits and is not even tried.
    """
    carrying = [pod for pod in gang.pending if pod.unhonoured]
    if not carrying:
        return None
    return Unhonoured(carrying[0].key, carrying[0].unhonoured, len(carrying) - 1)
