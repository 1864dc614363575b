"""Room for a pod shape on a node: counts, stranded devices, the resource to blame."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gangsched.core.model.resources import Resources
from gangsched.core.placement.room import UNBOUNDED, blamed_resource, fit_count, stranded_devices

GPU = "nvidia.com/gpu"
NAMES = ["cpu", "memory", "pods", GPU]


def items(r: Resources) -> tuple[tuple[str, int], ...]:
    return r.items()


def test_fit_count_is_the_tightest_resource() -> None:
    free = Resources.of({"cpu": 4000, "memory": 10, "pods": 3, GPU: 8})
    assert fit_count(free, items(Resources.of({"cpu": 1000, "pods": 1}))) == 3
    assert fit_count(free, items(Resources.of({"cpu": 1000, "memory": 4}))) == 2
    assert fit_count(free, items(Resources.of({GPU: 3}))) == 2
    assert fit_count(free, items(Resources.of({"example.com/fpga": 1}))) == 0
    assert fit_count(free, ()) == UNBOUNDED


def test_stranded_devices_are_free_devices_the_pod_does_not_ask_for() -> None:
    free = Resources.of({"cpu": 4000, GPU: 6, "example.com/fpga": 1, "hugepages-2Mi": 4})
    assert stranded_devices(free, Resources.of({"cpu": 1000})) == 7
    assert stranded_devices(free, Resources.of({"cpu": 1000, GPU: 1})) == 1
    assert stranded_devices(Resources.of({GPU: -1}), Resources.of({"cpu": 1})) == 0


def test_blame_names_devices_before_cpu_and_memory() -> None:
    free = Resources.of({"cpu": 500, "memory": 1})
    assert blamed_resource(free, Resources.of({"cpu": 1000, "memory": 2, GPU: 1})) == GPU
    assert blamed_resource(free, Resources.of({"cpu": 1000, "memory": 2})) == "cpu"
    assert blamed_resource(free, Resources.of({"cpu": 100})) == ""


@given(st.dictionaries(st.sampled_from(NAMES), st.integers(-5, 50)),
       st.dictionaries(st.sampled_from(NAMES), st.integers(1, 10), min_size=1))
def test_fit_count_agrees_with_repeated_fits(free_map: dict[str, int],
                                             ask_map: dict[str, int]) -> None:
    free, ask = Resources.of(free_map), Resources.of(ask_map)
    count = fit_count(free, items(ask))
    assert ask.scale(count).fits(free)
    assert not ask.scale(count + 1).fits(free)
    assert (count == 0) == (blamed_resource(free, ask) != "")
