"""A queue tree on the real control plane: weights share within each level (GPU-seconds
measured), a team's cap bounds its queues together, a queue with no place in the tree says
why on its status and in an Event while every other queue goes on, and a queue with child
queues takes no new gangs while its running ones go on.

Figures go to ``$GANGSCHED_SHARING_RESULTS`` as :mod:`tests.e2e.test_sharing`'s do.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pykube
import pytest

from devcluster.controlplane import LocalCluster, NodeShape
from tests.e2e.conftest import SchedulerProcess, start_gangsched, stop_gangsched
from tests.e2e.scenario import only_nodes
from tests.e2e.test_explain_status import gangsched_cli
from tests.e2e.test_sharing import SAMPLE_S, gpus_in_use, pending, record
from tests.e2e.workspace import Workspace, node_of, wait_for

API = "scheduling.gangsched.io/v1alpha1"
RUN_FOR = "4s"
"""How long each 2-GPU gang runs: long beside the second or so between one ending and the
next bound, which on a loaded machine would otherwise weigh on the ratios measured."""
SCHEDULER = "gang-tree"


@pytest.fixture(scope="module")
def tree_scheduler(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SchedulerProcess]:
    """A scheduler of its own whose starvation threshold is past every test here: a flood
    that waits a minute would otherwise have its oldest gang hold room, and the shares
    measured would be the starvation bound's, not the tree's."""
    log: Path = tmp_path_factory.mktemp("tree") / "gangsched.log"
    running = start_gangsched(cluster, log, f"--scheduler-name={SCHEDULER}",
                              "--starvation-seconds=600")
    yield running
    stop_gangsched(running)


def flood(ws: Workspace, queue: str, role: str, gangs: int, run_for: str) -> list[dict[str, Any]]:
    """Identical 2-GPU gangs of one pod that run ``run_for`` each, as PodGroup and pod."""
    manifests: list[dict[str, Any]] = []
    for i in range(gangs):
        group = f"{role}-{i:03d}"
        manifests.append(ws.podgroup(group, min_member=1, queue=queue))
        manifests.append(ws.pod(f"{group}-0", cpu="100m", gpus=2, group=group,
                                scheduler=SCHEDULER, run_for=run_for))
    return manifests


class Queues:
    """Queues named after the test's namespace (Queues are cluster-wide), deleted after."""

    def __init__(self, cluster: LocalCluster, ws: Workspace) -> None:
        self.cluster = cluster
        self.prefix = ws.name
        self.made: list[str] = []
        self.factory = pykube.object_factory(cluster.client, API, "Queue")

    def name(self, short: str) -> str:
        return f"{self.prefix}-{short}"

    def make(self, short: str, parent: str | None = None, **spec: Any) -> str:
        if parent is not None:
            spec["parent"] = self.name(parent)
        self.factory(self.cluster.client, {
            "apiVersion": API, "kind": "Queue", "metadata": {"name": self.name(short)},
            "spec": spec,
        }).create()
        self.made.append(self.name(short))
        return self.name(short)

    def get(self, short: str) -> dict[str, Any]:
        return dict(self.factory.objects(self.cluster.client).get(name=self.name(short)).obj)

    def open(self, *shorts: str) -> None:
        for short in shorts:
            self.cluster.kubectl("patch", "queue", self.name(short), "--type=merge",
                                 "-p", '{"spec": {"state": "Open"}}')

    def delete(self, short: str) -> None:
        self.cluster.kubectl("delete", "queue", self.name(short), "--ignore-not-found")

    def invalid(self, short: str) -> Mapping[str, Any] | None:
        for condition in (self.get(short).get("status") or {}).get("conditions") or []:
            if condition["type"] == "Invalid":
                return dict(condition)
        return None


@pytest.fixture
def queues(cluster: LocalCluster, ws: Workspace) -> Iterator[Queues]:
    made = Queues(cluster, ws)
    yield made
    if made.made:
        cluster.kubectl("delete", "queue", *made.made, "--ignore-not-found")


def sample(ws: Workspace, by: Mapping[str, str], seconds: float,
           backlogged: tuple[str, ...]) -> tuple[dict[str, float], list[dict[str, int]], float]:
    """GPU-seconds per group of pod-name prefixes (``by``: prefix to group) over about
    ``seconds``, each prefix of ``backlogged`` checked to still have work at every sample."""

    def group(name: str) -> str:
        return by.get(name.split("-", 1)[0], "other")

    totals = dict.fromkeys(by.values(), 0.0)
    samples: list[dict[str, int]] = []
    first = last = time.monotonic()
    while time.monotonic() < first + seconds:
        time.sleep(SAMPLE_S)
        pods = ws.pods()
        now = time.monotonic()
        used = gpus_in_use(pods, group)
        for prefix in backlogged:
            assert pending(pods, f"{prefix}-"), f"{prefix} ran out of work: not flooded"
        for key in totals:
            totals[key] += used.get(key, 0) * (now - last)
        samples.append(used)
        last = now
    return totals, samples, last - first


def interleaved(*floods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """PodGroup and pod pairs of every flood in turn, so no queue is ahead by arriving first."""
    out: list[dict[str, Any]] = []
    for i in range(0, max(len(f) for f in floods), 2):
        for manifests in floods:
            out.extend(manifests[i:i + 2])
    return out


@pytest.mark.usefixtures("tree_scheduler")
def test_weights_split_within_each_level_gpu_seconds_follow_the_tree(
    cluster: LocalCluster, ws: Workspace, queues: Queues
) -> None:
    # org ▸ t1 (weight 3) ▸ a, b; org ▸ t2 (weight 1) ▸ c. Deserved: a 3/8, b 3/8, c 1/4,
    # that is 6, 6 and 4 of 16 GPUs. Flat, the three queues would get a third each.
    only_nodes(cluster, 2, NodeShape(cpu="32", memory="128Gi", gpus=8))
    queues.make("org")
    queues.make("t1", "org", weight=3)
    queues.make("t2", "org", weight=1)
    for short, team in (("a", "t1"), ("b", "t1"), ("c", "t2")):
        queues.make(short, team, state="Closed")  # opened once every gang exists
    ws.create(*interleaved(*(flood(ws, queues.name(short), short, count, RUN_FOR)
                             for short, count in (("a", 40), ("b", 40), ("c", 30)))))
    queues.open("a", "b", "c")
    wait_for(lambda: sum(gpus_in_use(ws.pods(), lambda n: "all").values()) == 16, timeout=30,
             what="the three queues to fill the 16 GPUs")
    time.sleep(4.5)
    totals, _, window = sample(ws, {"a": "a", "b": "b", "c": "c"}, 20.0, ("a", "b", "c"))
    record("tree_3_levels", {
        "cluster": "2 nodes x 8 GPUs", "gang": f"1 pod x 2 GPUs, runs {RUN_FOR}",
        "tree": "org > t1 (3) > a (1), b (1); org > t2 (1) > c (1)",
        "deserved": {"a": 0.375, "b": 0.375, "c": 0.25}, "window_s": round(window, 1),
        "gpu_seconds": {k: round(v, 1) for k, v in totals.items()},
        "a_to_c": round(totals["a"] / totals["c"], 3),
        "b_to_c": round(totals["b"] / totals["c"], 3),
    })
    for short in ("a", "b"):
        ratio = totals[short] / totals["c"]
        assert 1.35 <= ratio <= 1.65, f"{short}:c GPU-seconds {totals} is {ratio:.2f}, not 1.5±10%"
    assert 0.9 <= totals["a"] / totals["b"] <= 1.1, f"a:b GPU-seconds {totals}, not 1:1"

    shown = gangsched_cli(cluster, "status", "-A")
    assert f"├─ {queues.name('t1')}" in shown and f"│  ├─ {queues.name('a')}" in shown
    assert f"   └─ {queues.name('c')}" in shown, shown


@pytest.mark.usefixtures("tree_scheduler")
def test_a_teams_cap_bounds_its_queues_together(
    cluster: LocalCluster, ws: Workspace, queues: Queues
) -> None:
    # t2 weighs three times t1 but may hold 4 GPUs: c1 and c2 share those 4, and t1's
    # queue takes the other 12 rather than leave them idle.
    only_nodes(cluster, 2, NodeShape(cpu="32", memory="128Gi", gpus=8))
    queues.make("org")
    queues.make("t1", "org", weight=1)
    queues.make("t2", "org", weight=3, capability={"nvidia.com/gpu": "4"})
    for short, team in (("a", "t1"), ("c1", "t2"), ("c2", "t2")):
        queues.make(short, team, state="Closed")  # opened once every gang exists
    ws.create(*interleaved(*(flood(ws, queues.name(short), short, count, RUN_FOR)
                             for short, count in (("a", 90), ("c1", 16), ("c2", 16)))))
    queues.open("a", "c1", "c2")
    wait_for(lambda: sum(gpus_in_use(ws.pods(), lambda n: "all").values()) == 16, timeout=30,
             what="the queues to fill the 16 GPUs")
    totals, samples, window = sample(ws, {"a": "t1", "c1": "c1", "c2": "c2"}, 16.0,
                                     ("a", "c1", "c2"))
    capped = [s.get("c1", 0) + s.get("c2", 0) for s in samples]
    record("tree_team_cap", {
        "cluster": "2 nodes x 8 GPUs", "team_cap_gpus": 4, "window_s": round(window, 1),
        "gpu_seconds": {k: round(v, 1) for k, v in totals.items()},
        "team_gpus_at_most": max(capped),
        "t1_gpus_on_average": round(totals["t1"] / window, 1),
        "utilisation": round(sum(totals.values()) / (16 * window), 3),
    })
    assert max(capped) == 4, f"t2's queues held {max(capped)} GPUs at most, cap 4"
    assert totals["c1"] > 0 and totals["c2"] > 0, f"{totals}: one of t2's queues got nothing"
    # t1 deserves 4 GPUs by weight; what t2 may not use is t1's, not idle.
    assert totals["t1"] / window >= 8, f"t1 held {totals['t1'] / window:.1f} GPUs on average"


@pytest.mark.usefixtures("gangsched")
def test_a_queue_with_no_place_in_the_tree_says_why_and_disturbs_no_other(
    cluster: LocalCluster, ws: Workspace, queues: Queues
) -> None:
    only_nodes(cluster, 1, NodeShape(cpu="32", memory="128Gi", gpus=8))
    orphan = queues.make("orphan", "team")  # the parent does not exist yet
    queues.make("x", "y")
    queues.make("y", "x")
    queues.make("fine")
    for short in ("orphan", "x", "fine"):
        ws.create(ws.podgroup(short, min_member=1, queue=queues.name(short)),
                  ws.pod(f"{short}-0", cpu="100m", gpus=1, group=short))
    wait_for(lambda: node_of(ws.pods()["fine-0"]), timeout=30, what="the fine queue's gang")

    expected = {"orphan": "ParentMissing", "x": "ParentCycle", "y": "ParentCycle"}
    wait_for(lambda: all((queues.invalid(s) or {}).get("reason") == r
                         for s, r in expected.items()),
             timeout=30, what="each bad queue's Invalid condition")
    assert "its parent queue" in str((queues.invalid("orphan") or {}).get("message"))
    assert "form a cycle" in str((queues.invalid("x") or {}).get("message"))
    assert queues.invalid("fine") is None

    def warned(short: str) -> list[dict[str, Any]]:
        events = pykube.Event.objects(cluster.client, namespace="default")
        return [e.obj for e in events if e.obj["involvedObject"].get("kind") == "Queue"
                and e.obj["involvedObject"].get("name") == queues.name(short)]

    wait_for(lambda: any(e["reason"] == "ParentMissing" for e in warned("orphan")),
             timeout=30, what="a Warning Event on the orphan queue")

    def says(group: str, text: str) -> bool:
        conditions = (ws.podgroup_obj(group).get("status") or {}).get("conditions") or []
        return any(text in str(c.get("message")) for c in conditions)

    wait_for(lambda: says("orphan", f"queue '{orphan}' is invalid"), timeout=30,
             what="the orphan's PodGroup to say why it waits")
    assert not any(node_of(ws.pods()[f"{s}-0"]) for s in ("orphan", "x"))

    # Its parent created, the orphan's gang runs; deleting that parent again is reported
    # on the child, whose running gang is not disturbed.
    queues.make("team")
    wait_for(lambda: node_of(ws.pods()["orphan-0"]), timeout=30, what="the orphan's gang to run")
    wait_for(lambda: queues.invalid("orphan") is None, timeout=30,
             what="the orphan's Invalid condition to go")
    queues.delete("team")
    wait_for(lambda: (queues.invalid("orphan") or {}).get("reason") == "ParentMissing",
             timeout=30, what="the deleted parent to be reported on its child")
    assert node_of(ws.pods()["orphan-0"]) and ws.pods()["fine-0"]


@pytest.mark.usefixtures("gangsched")
def test_closing_a_team_keeps_its_running_usage_under_the_organisations_cap(
    cluster: LocalCluster, ws: Workspace, queues: Queues
) -> None:
    # org may hold 4 cpu; its team's queue runs 4 gangs of 1 cpu, then the team is
    # Closed. What runs in it still fills the org: its other queue's gangs wait.
    only_nodes(cluster, 1, NodeShape(cpu="32", memory="128Gi"))
    org = queues.make("org", capability={"cpu": "4"})
    team = queues.make("team", "org")
    queues.make("kid", "team")
    queues.make("other", "org")

    def gangs(role: str, short: str, count: int) -> None:
        for i in range(count):
            ws.create(ws.podgroup(f"{role}-{i}", min_member=1, queue=queues.name(short)),
                      ws.pod(f"{role}-{i}-0", cpu="1", group=f"{role}-{i}"))

    gangs("kid", "kid", 4)
    wait_for(lambda: all(node_of(ws.pods()[f"kid-{i}-0"]) for i in range(4)), timeout=30,
             what="the team's four gangs to run")
    cluster.kubectl("patch", "queue", team, "--type=merge", "-p",
                    '{"spec": {"state": "Closed"}}')
    wait_for(lambda: any(c.get("type") == "Open" and c.get("status") == "False" for c in
                         (queues.get("team").get("status") or {}).get("conditions") or []),
             timeout=30, what="the team's status to say it is Closed")
    gangs("other", "other", 2)
    gangs("late", "kid", 1)

    def says(group: str, text: str) -> bool:
        conditions = (ws.podgroup_obj(group).get("status") or {}).get("conditions") or []
        return any(text in str(c.get("message")) for c in conditions)

    capped = f"queue '{org}' capability cpu=4 would be exceeded: allocated cpu=4"
    wait_for(lambda: all(says(f"other-{i}", capped) for i in range(2)), timeout=30,
             what="the other queue's gangs to wait for the org's cap")
    wait_for(lambda: says("late-0", f"queue '{team}' is closed"), timeout=30,
             what="the closed team's new gang to say why it waits")
    pods = ws.pods()
    assert not any(node_of(pods[f"{role}-0-0"]) for role in ("other", "late"))
    assert not node_of(pods["other-1-0"])
    assert all(node_of(pods[f"kid-{i}-0"]) for i in range(4)), "the team's gangs keep running"
    assert queues.invalid("kid") is None


@pytest.mark.usefixtures("gangsched")
def test_a_queue_with_child_queues_takes_no_new_gangs_and_keeps_its_running_ones(
    cluster: LocalCluster, ws: Workspace, queues: Queues
) -> None:
    only_nodes(cluster, 1, NodeShape(cpu="32", memory="128Gi", gpus=8))
    team = queues.make("team")
    ws.create(ws.podgroup("before", min_member=1, queue=team),
              ws.pod("before-0", cpu="100m", gpus=1, group="before"))
    wait_for(lambda: node_of(ws.pods()["before-0"]), timeout=30,
             what="the team's gang, bound while the team was a leaf")
    q1, q2 = queues.make("q1", "team"), queues.make("q2", "team")
    # Bound in q2, made last, the leaf's gang shows the scheduler knows both children.
    ws.create(ws.podgroup("leaf", min_member=1, queue=q2),
              ws.pod("leaf-0", cpu="100m", gpus=1, group="leaf"))
    wait_for(lambda: node_of(ws.pods()["leaf-0"]), timeout=30, what="the leaf queue's gang")
    ws.create(ws.podgroup("after", min_member=1, queue=team),
              ws.pod("after-0", cpu="100m", gpus=1, group="after"))
    said = f"queue '{team}' has child queues ({q1}, {q2}): submit to a leaf queue"

    def says(group: str) -> bool:
        conditions = (ws.podgroup_obj(group).get("status") or {}).get("conditions") or []
        return any(said in str(c.get("message")) for c in conditions)

    wait_for(lambda: says("after"), timeout=30, what="the team's new PodGroup to say why")
    wait_for(lambda: any(said in str(e.get("message")) for e in ws.events("after")),
             timeout=30, what="an Event saying why")
    pods = ws.pods()
    assert not node_of(pods["after-0"])
    assert node_of(pods["before-0"]) and not pods["before-0"]["metadata"].get(
        "deletionTimestamp"), "the team's running gang keeps running"


def test_a_queue_cannot_be_its_own_parent(cluster: LocalCluster, ws: Workspace) -> None:
    factory = pykube.object_factory(cluster.client, API, "Queue")
    with pytest.raises(pykube.exceptions.HTTPError, match="cannot be its own parent"):
        factory(cluster.client, {"apiVersion": API, "kind": "Queue",
                                 "metadata": {"name": f"{ws.name}-self"},
                                 "spec": {"parent": f"{ws.name}-self"}}).create()


RECLAIMER = "gang-reclaim"
RECLAIM_INTERVAL_S = 3.0
RECLAIM_BOUND_S = 25.0
"""B needs two reclaim decisions: one at once, one an interval later, each then waiting for
its victims' pods to go and its own to bind (a few seconds each on a loaded machine)."""


@pytest.fixture(scope="module")
def reclaim_scheduler(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SchedulerProcess]:
    log: Path = tmp_path_factory.mktemp("reclaim") / "gangsched.log"
    running = start_gangsched(cluster, log, f"--scheduler-name={RECLAIMER}", "--reclaim",
                              f"--reclaim-interval-seconds={RECLAIM_INTERVAL_S:g}",
                              "--starvation-seconds=600")
    yield running
    stop_gangsched(running)


def gangs_of(ws: Workspace, role: str, count: int, pods: int, gpus: int, queue: str) -> None:
    for i in range(count):
        group = f"{role}-{i}"
        ws.create(ws.podgroup(group, min_member=pods, queue=queue))
        ws.create(*(ws.pod(f"{group}-{k}", cpu="100m", gpus=gpus, group=group,
                           scheduler=RECLAIMER) for k in range(pods)))


def live_members(ws: Workspace, role: str) -> dict[str, int]:
    """Bound, not deleting, pods per gang of ``role``."""
    members: dict[str, int] = {}
    for name, pod in ws.pods().items():
        if name.startswith(f"{role}-") and node_of(pod) and not pod["metadata"].get(
                "deletionTimestamp"):
            group = name.rsplit("-", 1)[0]
            members[group] = members.get(group, 0) + 1
    return members


def borrowed_everything(cluster: LocalCluster, ws: Workspace, queues: Queues,
                        reclaimable: bool) -> None:
    """A (weight 1) runs eight gangs of two 1-GPU pods on all 16 GPUs while B is empty."""
    only_nodes(cluster, 2, NodeShape(cpu="32", memory="128Gi", gpus=8))
    queues.make("a", reclaimable=reclaimable)
    queues.make("b")
    gangs_of(ws, "a", 8, 2, 1, queues.name("a"))
    wait_for(lambda: sum(live_members(ws, "a").values()) == 16, timeout=60,
             what="A's gangs to take all 16 GPUs")


@pytest.mark.usefixtures("reclaim_scheduler")
def test_a_queue_below_its_share_reclaims_whole_gangs_of_the_queue_that_borrowed(
    cluster: LocalCluster, ws: Workspace, queues: Queues
) -> None:
    borrowed_everything(cluster, ws, queues, reclaimable=True)
    started = time.monotonic()
    gangs_of(ws, "b", 2, 2, 2, queues.name("b"))  # two gangs of 4 GPUs: B's share is 8
    wait_for(lambda: sum(live_members(ws, "b").values()) == 4, timeout=RECLAIM_BOUND_S + 30,
             what="B's gangs to run")
    reached = time.monotonic() - started
    time.sleep(2 * RECLAIM_INTERVAL_S)  # and nothing more is taken once B has its share
    a, b = live_members(ws, "a"), live_members(ws, "b")
    record("reclaim", {
        "cluster": "2 nodes x 8 GPUs", "a": "8 gangs x 2 pods x 1 GPU, weight 1",
        "b": "2 gangs x 2 pods x 2 GPUs, weight 1", "interval_s": RECLAIM_INTERVAL_S,
        "b_at_share_after_s": round(reached, 1), "bound_s": RECLAIM_BOUND_S,
        "a_gangs_left": len(a),
    })
    assert reached <= RECLAIM_BOUND_S, f"B reached its share after {reached:.1f}s"
    assert b == {"b-0": 2, "b-1": 2}, "none of B's gangs was evicted"
    assert len(a) == 4 and set(a.values()) == {2}, f"A kept whole gangs on its 8 GPUs: {a}"
    gone = set(f"a-{i}" for i in range(8)) - set(a)
    assert all(not any(n.startswith(f"{g}-") for n in ws.pods()) for g in gone), (
        "every evicted gang went whole")

    def reclaimed_event(group: str) -> bool:
        return any("reclaiming for queue" in str(e.get("message")) for e in ws.events(group))

    assert all(reclaimed_event(group) for group in gone)


@pytest.mark.usefixtures("reclaim_scheduler")
def test_an_opted_out_queue_is_never_reclaimed_from(
    cluster: LocalCluster, ws: Workspace, queues: Queues
) -> None:
    borrowed_everything(cluster, ws, queues, reclaimable=False)
    gangs_of(ws, "b", 2, 2, 2, queues.name("b"))
    time.sleep(RECLAIM_BOUND_S)
    assert sum(live_members(ws, "a").values()) == 16
    assert not live_members(ws, "b")
    said = (f"no reclaim: queue '{queues.name('a')}' borrows above its deserved share but "
            f"is not reclaimable")
    conditions = (ws.podgroup_obj("b-0").get("status") or {}).get("conditions") or []
    assert any(said in str(c.get("message")) for c in conditions), conditions


BORROWER_CLASS = "gangsched-test-borrower"
LOOP_WATCH_S = 30.0
"""Ten reclaim intervals: without one order, reclaim and preemption undo each other
several times over in that time."""


@pytest.fixture(scope="module")
def borrower_class(cluster: LocalCluster) -> Iterator[None]:
    pykube.object_factory(cluster.client, "scheduling.k8s.io/v1", "PriorityClass")(
        cluster.client, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                         "metadata": {"name": BORROWER_CLASS}, "value": 1000}).create()
    yield
    cluster.kubectl("delete", "priorityclass", BORROWER_CLASS, "--ignore-not-found")


@pytest.mark.usefixtures("reclaim_scheduler", "borrower_class")
def test_reclaim_and_priority_preemption_do_not_take_room_back_and_forth(
    cluster: LocalCluster, ws: Workspace, queues: Queues
) -> None:
    """A borrows 6 of 8 GPUs with high-priority gangs; B (same weight) runs one low gang and
    submits another. Each queue creates every pod evicted from it again at once, as a
    controller does. B reclaims once; A's gang, back, waits and says why instead of
    preempting B's back, and B has nothing more to reclaim."""
    only_nodes(cluster, 1, NodeShape(cpu="32", memory="128Gi", gpus=8))
    queues.make("a")
    queues.make("b")
    manifests: dict[str, dict[str, Any]] = {}

    def submit(group: str, queue: str, high: bool = False) -> None:
        pod = ws.pod(f"{group}-0", cpu="100m", gpus=2, group=group, scheduler=RECLAIMER)
        if high:
            pod["spec"]["priorityClassName"] = BORROWER_CLASS
        manifests[pod["metadata"]["name"]] = pod
        ws.create(ws.podgroup(group, min_member=1, queue=queues.name(queue)), pod)

    for i in range(3):
        submit(f"a-{i}", "a", high=True)
    submit("b-0", "b")
    wait_for(lambda: sum(live_members(ws, "a").values()) + sum(live_members(ws, "b").values())
             == 4, timeout=60, what="A's three gangs and B's first to run")
    submit("b-1", "b")
    evicted: list[str] = []
    until = time.monotonic() + LOOP_WATCH_S
    while time.monotonic() < until:
        present = ws.pods()
        for name, manifest in manifests.items():
            if name not in present:
                evicted.append(name)
                ws.create(manifest)
        time.sleep(0.25)
    a, b = live_members(ws, "a"), live_members(ws, "b")
    assert len(evicted) <= 1, f"pods evicted and created again: {evicted}"
    assert b == {"b-0": 1, "b-1": 1}, f"B reclaimed its share and kept it: {b}"
    (back,) = [group for group in ("a-0", "a-1", "a-2") if group not in a]
    said = (f"no preemption: the gangs of lower priority that could make room are of queue "
            f"'{queues.name('b')}', which would fall below its deserved share")
    conditions = (ws.podgroup_obj(back).get("status") or {}).get("conditions") or []
    assert any(said in str(c.get("message")) for c in conditions), conditions
