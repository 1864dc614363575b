"""A placed gang with WaitForFirstConsumer claims: its claims get their nodes first, and
no member is bound until every claim is; claims that take too long are taken back."""

from __future__ import annotations

from dataclasses import replace

from gangsched.core.actions import SelectClaimNode
from gangsched.core.fit.volumes import Provisioning, Storage, with_volumes
from gangsched.core.model.objects import (
    Claim,
    ClaimRef,
    Gang,
    GangKey,
    NodeName,
    StorageClassSpec,
    Volume,
)
from gangsched.core.provisioning import ProvisionLimits, provision_first
from gangsched.core.reasons import ClaimsProvisioning, ProvisioningTimedOut
from gangsched.core.stages.session import CycleResult
from gangsched.core.state import State
from gangsched.core.step import step
from gangsched.core.view import StepView
from tests.unit.test_cycle import SIX_CPU, cycle, gang, node, placed, reasons
from tests.unit.test_step import CONFIG, Cluster, binds, group, members, view

LIMITS = ProvisionLimits(timeout_s=60.0, backoff_s=30.0)
JOB = GangKey("ns/job")
LOCAL = StorageClassSpec("local", "rancher.io/local-path", wait_for_first_consumer=True)


def job_with_claims() -> Gang:
    job = gang("ns/job", 2, 2)
    return replace(job, pending=tuple(replace(p, claims=(ClaimRef(f"data-{i}"),))
                                      for i, p in enumerate(job.pending)))


def stored(*claims: Claim) -> Storage:
    return Storage({c.key: c for c in claims}, {}, {"local": LOCAL})


def unbound(index: int, node: str | None = None) -> Claim:
    return Claim(f"ns/data-{index}", "local", selected_node=NodeName(node) if node else None)


def run(
    storage: Storage, provisioning: dict[GangKey, Provisioning], now: float
) -> tuple[CycleResult, list[SelectClaimNode], dict[GangKey, Provisioning]]:
    gangs = with_volumes([job_with_claims(), gang("ns/small", 1)], storage, {}, {})
    return provision_first(cycle(SIX_CPU, gangs), gangs, storage, provisioning, now, LIMITS)


def test_a_placed_gang_gives_its_claims_their_nodes_and_binds_nothing() -> None:
    result, writes, remembered = run(stored(unbound(0), unbound(1)), {}, now=100.0)
    assert placed(result) == ["ns/small"]
    assert sorted(writes, key=lambda w: w.claim) == [
        SelectClaimNode("ns/data-0", NodeName("n1")), SelectClaimNode("ns/data-1", NodeName("n2"))]
    reason = reasons(result)["ns/job"]
    assert reason == ClaimsProvisioning(("ns/data-0", "ns/data-1"), 2)
    assert remembered == {JOB: Provisioning(since=100.0)}


def test_claims_given_their_nodes_are_not_written_again_and_hold_the_gang_there() -> None:
    storage = stored(unbound(0, "n3"), unbound(1, "n2"))
    result, writes, remembered = run(storage, {JOB: Provisioning(since=100.0)}, now=110.0)
    assert writes == []
    assert placed(result) == ["ns/small"]
    assert remembered == {JOB: Provisioning(since=100.0)}


def test_once_every_claim_is_bound_the_gang_is_bound_whole() -> None:
    bound = [replace(unbound(i, node), volume_name=f"pv-{i}", bound=True)
             for i, node in ((0, "n3"), (1, "n2"))]
    storage = replace(stored(*bound), volumes={f"pv-{i}": Volume(f"pv-{i}") for i in (0, 1)})
    result, writes, remembered = run(storage, {JOB: Provisioning(since=100.0)}, now=110.0)
    assert sorted(placed(result)) == ["ns/job", "ns/small"]
    assert writes == [] and remembered == {}


def test_a_half_bound_gang_still_binds_no_member() -> None:
    storage = stored(replace(unbound(0, "n3"), volume_name="pv-0", bound=True), unbound(1, "n2"))
    storage = replace(storage, volumes={"pv-0": Volume("pv-0")})
    result, _, _ = run(storage, {JOB: Provisioning(since=100.0)}, now=110.0)
    assert "ns/job" not in placed(result)
    assert reasons(result)["ns/job"] == ClaimsProvisioning(("ns/data-1",), 1)


def test_claims_not_provisioned_in_time_are_taken_back_and_the_gang_backs_off() -> None:
    storage = stored(unbound(0, "n3"), unbound(1, "n2"))
    result, writes, remembered = run(storage, {JOB: Provisioning(since=100.0)}, now=161.0)
    assert sorted(writes, key=lambda w: w.claim) == [
        SelectClaimNode("ns/data-0", None), SelectClaimNode("ns/data-1", None)]
    assert isinstance(reasons(result)["ns/job"], ProvisioningTimedOut)
    assert remembered == {JOB: Provisioning(since=100.0, backoff_until=191.0)}
    # Backing off: not tried again, nothing written.
    released = stored(unbound(0), unbound(1))
    result, writes, remembered = run(released, remembered, now=170.0)
    assert writes == [] and isinstance(reasons(result)["ns/job"], ProvisioningTimedOut)
    # The backoff over, it starts again.
    result, writes, remembered = run(released, remembered, now=192.0)
    assert len(writes) == 2 and remembered == {JOB: Provisioning(since=192.0)}


def with_storage(stepped: StepView, storage: Storage) -> StepView:
    cluster = stepped.cluster
    assert isinstance(cluster, Cluster)
    return replace(stepped, cluster=replace(cluster, storage=storage))


def test_the_step_writes_the_claims_first_and_binds_the_gang_once_they_are_bound() -> None:
    nodes = [node("n1", 2), node("n2", 2)]
    pods = [replace(p, claims=(ClaimRef(f"data-{i}"),))
            for i, p in enumerate(members("job", 2, cores=2))]
    waiting = with_storage(view(nodes, pods, [group("job", 2)]), stored(unbound(0), unbound(1)))
    first = step(State(), waiting, 100.0, CONFIG)
    writes = [a for a in first.actions if isinstance(a, SelectClaimNode)]
    assert sorted((w.claim, w.node) for w in writes) == [("ns/data-0", "n1"), ("ns/data-1", "n2")]
    assert binds(first) == []
    assert 100.0 + ProvisionLimits().timeout_s in first.thresholds

    bound = [replace(unbound(i, f"n{i + 1}"), volume_name=f"pv-{i}", bound=True) for i in (0, 1)]
    storage = replace(stored(*bound), volumes={f"pv-{i}": Volume(f"pv-{i}") for i in (0, 1)})
    done = with_storage(waiting, storage)
    second = step(first.state, done, 102.0, CONFIG)
    assert binds(second) == [JOB]
    assert not any(isinstance(a, SelectClaimNode) for a in second.actions)
    assert second.state.provisioning == {}
