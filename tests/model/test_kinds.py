"""The closed sets of names (model/kinds.py): members are their strings, and the loaders hand them out."""

from __future__ import annotations

import ast
import json
from enum import StrEnum
from pathlib import Path

import pytest

from cutcheck.model import kinds
from cutcheck.model.graph import JobGraph
from cutcheck.model.kinds import CheckpointMode, Partitioner, RestoreMode, VertexKind
from cutcheck.reference.scenario import Scenario
from cutcheck.reference.storage.config import restore_section

ENUMS = [getattr(kinds, name) for name in kinds.__all__ if name != "values"]


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__name__)
def test_a_member_is_its_string_in_json_format_and_hash(enum: type[StrEnum]) -> None:
    for member in enum:
        assert json.dumps({member: member}) == json.dumps({member.value: member.value})
        assert f"{member}" == str(member) == member.value and hash(member) == hash(member.value)


def test_the_module_is_a_leaf() -> None:
    tree = ast.parse(Path(kinds.__file__).read_text())
    imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert imported and not [m for m in imported if m and m.startswith("cutcheck")]


def test_loaders_hand_out_members() -> None:
    graph = {"vertices": [{"id": "s", "kind": "source", "records": 5, "parallelism": 2}, {"id": "k", "kind": "sink"}],
             "edges": [{"from": "s", "to": "k"}]}
    job = JobGraph.from_json(graph)
    assert job.vertices[0].kind is VertexKind.SOURCE and job.edges[0].partitioner is Partitioner.REBALANCE
    scenario = Scenario.from_json({"graph": graph, "checkpoint": {"mode": "unaligned"}})
    assert scenario.checkpoint.mode is CheckpointMode.UNALIGNED
    assert scenario.with_overrides(mode="aligned_timeout").checkpoint.mode is CheckpointMode.ALIGNED_TIMEOUT
    assert restore_section({"path": "chk-1", "mode": "claim"}) == ("chk-1", RestoreMode.CLAIM)
    assert json.dumps(scenario.to_json()) == json.dumps(Scenario.from_json(scenario.to_json()).to_json())
