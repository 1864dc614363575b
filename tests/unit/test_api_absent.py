"""A cluster whose API server lacks an API gangsched reads: the feature is off, readiness
says so without failing, and a pod needing it waits with a reason naming the API."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.model.objects import PodKey
from gangsched.core.placement.capacity import Capacity, Unplaceable
from gangsched.core.reasons import DevicesNotServed, code_of
from gangsched.discovery import DEVICES, Served
from gangsched.health import Health
from tests.unit.clusters import gang
from tests.unit.test_dra import claiming, snapshot


def test_a_pod_with_claims_waits_naming_the_devices_api_the_server_does_not_serve() -> None:
    base = snapshot(["n-0"])
    unserved = replace(base, devices=replace(base.devices, unserved=DEVICES))
    decision = Capacity(unserved).place(gang("ns/g", [claiming("ns/g-0", "gpus", "nic")]))
    assert isinstance(decision, Unplaceable)
    assert code_of(decision.reason) == "DevicesNotServed"
    assert decision.reason == DevicesNotServed(PodKey("ns/g-0"), 2, "resource.k8s.io/v1")


def test_without_the_devices_api_the_dra_kinds_are_off_and_the_rest_stays() -> None:
    served = Served(frozenset({"resourceslices", "deviceclasses", "resourceclaims",
                               "workloads", "podgroups.scheduling.k8s.io"}))
    assert not served.devices
    assert not served.serves("resourceclaims") and served.serves("pods")
    assert served.summary() == {"resource.k8s.io/v1": "dynamic resource allocation",
                                "scheduling.k8s.io/v1beta1": "native PodGroups"}
    assert Served().devices and Served().summary() == {}


def test_a_replica_is_ready_without_an_api_and_its_readiness_names_it() -> None:
    health = Health(stale_after_s=10, unserved={DEVICES: "dynamic resource allocation"})
    for part in health.waiting_for:
        health.synced(part)
    health.start_scheduling()
    assert health.readiness() == (
        True, "ready: leading (resource.k8s.io/v1 not served: dynamic resource allocation off)")
