"""Which of the APIs gangsched reads the API server serves, asked once at start.

A release may lack one: the native Workload and PodGroup before Kubernetes 1.37,
``resource.k8s.io/v1`` before 1.34; Kueue's Workload where Kueue is not
installed. The feature that API carries is then off on that cluster: its kinds
are not watched and readiness does not wait for them; one ``api_not_served`` log
line names each, ``/readyz`` lists them and ``gangsched_api_served`` is 0 for
them. A pod needing an API that is off waits
with a reason saying so (:class:`gangsched.core.reasons.DevicesNotServed`).

A group version the server cannot be asked about (it does not answer) counts as
served: its watches then retry and report their own failures, as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import aiohttp
import orjson
import structlog
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import Gauge

from gangsched.core.kubeobjects.composites import COMPOSITE_API
from gangsched.core.kubeobjects.queues import KUEUE_API
from gangsched.reflector import raise_for_status

__all__ = ["API_SERVED", "NEEDED", "Api", "Served", "discover"]

log = structlog.get_logger(__name__)

API_SERVED = Gauge("gangsched_api_served",
                   "1 when the API server serves a kind gangsched reads, 0 when it does not "
                   "(the feature it carries is off)", ["api", "resource"])


@dataclass(frozen=True, slots=True)
class Api:
    """A kind gangsched reads: where it is served, and what goes without it."""

    group_version: str
    resource: str
    feature: str


STORAGE = "storage.k8s.io/v1"
DEVICES = "resource.k8s.io/v1"
NATIVE = "scheduling.k8s.io/v1beta1"
NEEDED: Mapping[str, Api] = {
    "pods": Api("v1", "pods", "scheduling"),
    "nodes": Api("v1", "nodes", "scheduling"),
    "namespaces": Api("v1", "namespaces", "namespace selectors"),
    "persistentvolumeclaims": Api("v1", "persistentvolumeclaims", "volumes"),
    "persistentvolumes": Api("v1", "persistentvolumes", "volumes"),
    "priorityclasses": Api("scheduling.k8s.io/v1", "priorityclasses", "priority"),
    "poddisruptionbudgets": Api("policy/v1", "poddisruptionbudgets", "preemption budgets"),
    "storageclasses": Api(STORAGE, "storageclasses", "volumes"),
    "csinodes": Api(STORAGE, "csinodes", "CSI volume limits"),
    "volumeattachments": Api(STORAGE, "volumeattachments", "CSI volume limits"),
    "csidrivers": Api(STORAGE, "csidrivers", "CSI volume limits"),
    "csistoragecapacities": Api(STORAGE, "csistoragecapacities", "storage capacity"),
    "resourceslices": Api(DEVICES, "resourceslices", "dynamic resource allocation"),
    "deviceclasses": Api(DEVICES, "deviceclasses", "dynamic resource allocation"),
    "resourceclaims": Api(DEVICES, "resourceclaims", "dynamic resource allocation"),
    "workloads": Api(NATIVE, "workloads", "native PodGroups"),
    "podgroups.scheduling.k8s.io": Api(NATIVE, "podgroups", "native PodGroups"),
    "compositepodgroups": Api(COMPOSITE_API, "compositepodgroups", "CompositePodGroups"),
    "nodepools": Api("karpenter.sh/v1", "nodepools", "asking Karpenter for nodes"),
    "kueueworkloads": Api(KUEUE_API, "workloads", "waiting for Kueue's admission"),
}
"""Every built-in kind read, by the name its reflector (or kopf's handler) goes by."""


@dataclass(frozen=True, slots=True)
class Served:
    """What discovery found: the kinds of :data:`NEEDED` the API server does not serve."""

    absent: frozenset[str] = frozenset()

    def serves(self, kind: str) -> bool:
        return kind not in self.absent

    @property
    def devices(self) -> bool:
        """Whether dynamic resource allocation is on: its claims can be allocated."""
        return self.serves("resourceclaims")

    def summary(self) -> dict[str, str]:
        """Each API not served, with the features that are off for it."""
        features: dict[str, set[str]] = {}
        for kind in sorted(self.absent):
            api = NEEDED[kind]
            features.setdefault(api.group_version, set()).add(api.feature)
        return {gv: ", ".join(sorted(names)) for gv, names in features.items()}


async def discover(api: client.ApiClient, kinds: Iterable[str] = NEEDED) -> Served:
    """Ask the API server once what it serves of ``kinds``; log each API it lacks once."""
    wanted = {kind: NEEDED[kind] for kind in kinds}
    resources: dict[str, frozenset[str] | None] = {}
    for group_version in sorted({a.group_version for a in wanted.values()}):
        resources[group_version] = await _resources(api, group_version)
    absent = frozenset(kind for kind, a in wanted.items()
                       if (found := resources[a.group_version]) is not None
                       and a.resource not in found)
    for kind, a in wanted.items():
        API_SERVED.labels(api=a.group_version, resource=a.resource).set(kind not in absent)
    served = Served(absent)
    for group_version, features in served.summary().items():
        log.warning("api_not_served", api=group_version, off=features,
                    kinds=sorted(NEEDED[k].resource for k in absent
                                 if NEEDED[k].group_version == group_version))
    return served


async def _resources(api: client.ApiClient, group_version: str) -> frozenset[str] | None:
    """The resources one group version serves (none when it is not served at all); None
    when the server could not tell."""
    path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    try:
        response = await api.call_api(path, "GET", auth_settings=["BearerToken"],
                                      _preload_content=False, _return_http_data_only=True,
                                      _request_timeout=30)
        await raise_for_status(response)
        try:
            body = orjson.loads(await response.read())
        finally:
            response.release()
    except ApiException as error:
        if error.status == 404:
            return frozenset()
        log.warning("discovery_failed", api=group_version, status=error.status,
                    reason=error.reason)
        return None
    except (TimeoutError, aiohttp.ClientError, orjson.JSONDecodeError) as error:
        log.warning("discovery_failed", api=group_version, error=str(error))
        return None
    return frozenset(str(r.get("name", "")) for r in body.get("resources") or ()
                     if isinstance(r, dict))
