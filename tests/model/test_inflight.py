"""NetworkConfig and the FLIP-183 worst-case in-flight bound."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import job_graphs

from cutcheck.model.errors import ScenarioError
from cutcheck.model.execution import ExecutionGraph
from cutcheck.model.graph import JobGraph
from cutcheck.model.inflight import InflightBound, NetworkConfig, worst_case_inflight_bytes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@st.composite
def networks(draw: st.DrawFn) -> NetworkConfig:
    buffer_bytes = draw(st.integers(1, 65536))
    return NetworkConfig(
        buffer_bytes=buffer_bytes,
        record_bytes=draw(st.integers(1, buffer_bytes)),
        exclusive=draw(st.integers(1, 10)),
        floating=draw(st.integers(1, 20)),
        output_pool=draw(st.none() | st.integers(1, 50)),
    )


def test_defaults() -> None:
    n = NetworkConfig()
    assert (n.buffer_bytes, n.record_bytes, n.exclusive, n.floating, n.output_pool) == (4096, 64, 2, 8, None)
    assert n.output_pool_size(3) == 3 * 2 + 8
    assert n.input_gate_buffers(5) == 5 * 2 + 8
    assert NetworkConfig(output_pool=7).output_pool_size(3) == 7


@pytest.mark.parametrize("field", ["buffer_bytes", "record_bytes", "exclusive", "floating", "output_pool"])
@pytest.mark.parametrize("value", [0, -1, 2.5, "8", True])
def test_invalid_field_is_named(field: str, value: object) -> None:
    with pytest.raises(ScenarioError, match=f"'{field}'"):
        NetworkConfig(**{field: value})  # type: ignore[arg-type]


def test_record_must_fit_a_buffer() -> None:
    with pytest.raises(ScenarioError, match="record_bytes.*buffer_bytes"):
        NetworkConfig(buffer_bytes=64, record_bytes=65)
    assert NetworkConfig(buffer_bytes=64, record_bytes=64).record_bytes == 64


def test_config_is_frozen() -> None:
    n = NetworkConfig()
    with pytest.raises(AttributeError):
        n.buffer_bytes = 1  # type: ignore[misc]


def test_from_json() -> None:
    assert NetworkConfig.from_json(None) == NetworkConfig()
    n = NetworkConfig.from_json({"buffer_bytes": 1024, "record_bytes": 32, "exclusive": 1, "floating": 2})
    assert n == NetworkConfig(1024, 32, 1, 2)
    assert NetworkConfig.from_json(n.to_json()) == n
    with pytest.raises(ScenarioError, match="buffers"):
        NetworkConfig.from_json({"buffers": 3})
    with pytest.raises(ScenarioError, match="network"):
        NetworkConfig.from_json([1])  # type: ignore[arg-type]


def test_flip183_formula_for_one_pair() -> None:
    """FLIP-183: (bufferSize·subpartitions·exclusive + bufferSize·floating) + (bufferSize·channels·exclusive + bufferSize·floating)."""
    job = JobGraph.from_json(
        {
            "vertices": [
                {"id": "a", "kind": "source", "parallelism": 1, "records": 1},
                {"id": "b", "kind": "sink", "parallelism": 1},
            ],
            "edges": [{"from": "a", "to": "b"}],
        }
    )
    bound = worst_case_inflight_bytes(ExecutionGraph(job), NetworkConfig(buffer_bytes=1000, exclusive=2, floating=8))
    assert bound.total == (1000 * 1 * 2 + 1000 * 8) + (1000 * 1 * 2 + 1000 * 8)


def test_keyed_pipeline_by_hand() -> None:
    eg = ExecutionGraph(JobGraph.from_json(EXAMPLES / "keyed-pipeline.json"))
    bound = worst_case_inflight_bytes(eg, NetworkConfig())
    b = 4096
    # src(2) -rebalance-> map(3) -hash-> count(2) -rebalance-> sink(1)
    upstream = 2 * b * (3 * 2 + 8) + 3 * b * (2 * 2 + 8) + 2 * b * (1 * 2 + 8)
    downstream = 3 * b * (2 * 2 + 8) + 2 * b * (3 * 2 + 8) + 1 * b * (2 * 2 + 8)
    assert (bound.upstream, bound.downstream, bound.total) == (upstream, downstream, upstream + downstream)
    assert bound.total == 655360


def test_output_pool_replaces_partition_formula() -> None:
    eg = ExecutionGraph(JobGraph.from_json(EXAMPLES / "keyed-pipeline.json"))
    bound = worst_case_inflight_bytes(eg, NetworkConfig(output_pool=5))
    assert set(bound.partitions.values()) == {5 * 4096}
    assert bound.gates == worst_case_inflight_bytes(eg, NetworkConfig()).gates


@given(job_graphs(), networks())
def test_bound_matches_brute_force(job: JobGraph, network: NetworkConfig) -> None:
    eg = ExecutionGraph(job)
    bound = worst_case_inflight_bytes(eg, network)
    subpartitions = Counter((c.producer, c.edge) for c in eg.channels)
    channels = Counter((c.consumer, c.gate) for c in eg.channels)
    expected_up = 0
    for key in subpartitions:
        buffers = network.output_pool if network.output_pool is not None else (
            subpartitions[key] * network.exclusive + network.floating
        )
        assert bound.partitions[key] == network.buffer_bytes * buffers
        expected_up += network.buffer_bytes * buffers
    expected_down = 0
    for key in channels:
        per_gate = network.buffer_bytes * channels[key] * network.exclusive + network.buffer_bytes * network.floating
        assert bound.gates[key] == per_gate
        expected_down += per_gate
    assert set(bound.partitions) == set(subpartitions) == set(eg.partitions)
    assert set(bound.gates) == set(channels) == set(eg.gates)
    assert bound.upstream == expected_up and bound.downstream == expected_down
    assert bound.total == expected_up + expected_down
    assert isinstance(bound, InflightBound)


@given(job_graphs(), networks(), st.integers(2, 4))
def test_bound_is_linear_in_buffer_size(job: JobGraph, network: NetworkConfig, factor: int) -> None:
    eg = ExecutionGraph(job)
    bigger = NetworkConfig(
        network.buffer_bytes * factor, network.record_bytes, network.exclusive, network.floating, network.output_pool
    )
    assert worst_case_inflight_bytes(eg, bigger).total == factor * worst_case_inflight_bytes(eg, network).total
