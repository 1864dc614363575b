"""PodGroups of every flavour we honour, named together for the callers that read one whole.

gangsched's own PodGroup, scheduler-plugins' (``scheduling.x-k8s.io``),
Volcano's (``scheduling.volcano.sh``) and Kubernetes' own (``scheduling.k8s.io``,
1.37's native gang API) say the same thing with different fields; operators
such as Kubeflow's training-operator or Spark create the Volcano and
scheduler-plugins ones, the Job controller the native one, so honouring them
all is what lets those users switch by changing only ``schedulerName``.

Each fact is defined once: what a group is (``GroupSpec``, ``Flavor``, keys) in
:mod:`gangsched.core.model.objects`, how it and a pod's membership are read from the
API in :mod:`gangsched.core.kubeobjects`, its status in
:mod:`gangsched.core.kubeobjects.status_bodies`. This module only gathers their names.
"""

from __future__ import annotations

from gangsched.core.kubeobjects.podgroups import (
    COSCHEDULING_LABEL,
    GROUP_LABEL,
    PREEMPTIBLE_ANNOTATIONS,
    QUEUE_ANNOTATION,
    VOLCANO_ANNOTATION,
    VOLCANO_QUEUE_ANNOTATION,
    group_from_api,
    group_key_of,
    group_name_of,
    native_group_name,
)
from gangsched.core.kubeobjects.status_bodies import (
    FINISHED_PHASES,
    GroupStatus,
    Phase,
    group_status,
)
from gangsched.core.model.objects import Flavor, GroupSpec, MemberCounts, gang_key, solo_gang_key

__all__ = [
    "COSCHEDULING_LABEL", "FINISHED_PHASES", "GROUP_LABEL", "PREEMPTIBLE_ANNOTATIONS",
    "QUEUE_ANNOTATION", "VOLCANO_ANNOTATION", "VOLCANO_QUEUE_ANNOTATION",
    "Flavor", "GroupSpec", "GroupStatus", "MemberCounts", "Phase",
    "gang_key", "group_from_api", "group_key_of", "group_name_of", "group_status",
    "native_group_name", "solo_gang_key",
]
