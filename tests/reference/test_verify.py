"""verify with findings in several stages: every stage still runs, the table and every counterexample
path are printed, the report holds them, and the exit code is 1 (never 2, which means bad input)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from cutcheck.reference.fuzzing.generate import scenario_from_seed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "scenarios" / "keyed-unaligned.json"


def test_verify_prints_every_counterexample_and_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cutcheck import proofs, spark_validation
    from cutcheck.cli import app
    from cutcheck.proofs.registry import ProofResult
    from cutcheck.reference.core.coverage import Coverage
    from cutcheck.reference.fuzzing import campaigns as fz
    from cutcheck.reference.fuzzing.verdicts import Verdict
    from cutcheck.reference.judge import finding

    fuzz_scenario = scenario_from_seed(4, mutants=("no-output-state",))
    coverage = Coverage()
    coverage.hit("handler", "CollectingBarriers", "barrier_received")
    found = Verdict(finding("CUT", "planted"), fuzz_scenario)
    monkeypatch.setattr(proofs, "run", lambda: [ProofResult("cut-unaligned", "proved", "unbounded", 0.1),
                                                ProofResult("cut[x]", "counterexample", "4", 0.1, expected="counterexample")])
    monkeypatch.setattr(fz, "hypothesis_campaign", lambda **kw: fz.CampaignResult(
        examples=3, seconds=0.5, failure=found, coverage=coverage))
    engine_fault = {"invariant": "ENGINE_FAULT", "detail": "KeyError: 'x'"}

    def kill(m: str, **kw: object) -> fz.KillResult:
        if m == "discard-on-abort":  # a scenario that fails without any mutant: the engine's own fault
            return fz.KillResult(m, False, 0.1, 7, "", 6, engine_fault, scenario_from_seed(6))
        return fz.KillResult(m, True, 0.1, 2, "CUT", 4)

    monkeypatch.setattr(fz, "kill", kill)
    monkeypatch.setattr(spark_validation, "validate", lambda **kw: SimpleNamespace(
        ok=True, lost=0, duplicated=0, phantom=0, count_gaps=0, to_dict=lambda: {"ok": True}))
    examples = tmp_path / "ex"
    examples.mkdir()
    scen = json.loads(EXAMPLE.read_text())
    scen["graph"] = str(EXAMPLE.parent.parent / "keyed-pipeline.json")
    (examples / "s.json").write_text(json.dumps(scen))
    res = CliRunner().invoke(app, ["verify", "--examples", str(examples), "--work-dir", str(tmp_path / "vw"),
                                   "--json", str(tmp_path / "v.json")])
    assert res.exit_code == 1, res.output
    for text in ("FAILED", "counterexample (fuzz): CUT: planted", "ENGINE FAULT while hunting discard-on-abort",
                 "counterexample (mutants (discard-on-abort)): ENGINE_FAULT", "example s", "spark validation",
                 "coverage of the fuzz stage: 1 of", "not reached:",
                 "example s: trace skipped (the run was not traced)"):  # a skipped check is said
        assert text in res.output, text
    report = json.loads((tmp_path / "v.json").read_text())
    paths = [Path(c["path"]) for c in report["counterexamples"]]
    assert len(paths) == 2 and all(p.is_file() for p in paths), paths
    assert all(f"replay: cutcheck simulate {p} --trace" in res.output for p in paths)
    assert json.loads(paths[1].read_text()) == scenario_from_seed(6)
    assert report["coverage"]["reached"] == {"handler CollectingBarriers.barrier_received": 1}
    assert [r["ok"] for r in report["rows"]][2:4] == [False, False]  # fuzz and mutants
    assert report["example_verdicts"]["s"]["outcome"] == "holds"
    # Abstract-state coverage: reached of reachable, and every unreachable cell under its reason, in both.
    from cutcheck.reference.fuzzing.abstract_coverage import ABSTRACT_UNIVERSE, cell_name

    unreachable = {cell_name(c): why for c, why in ABSTRACT_UNIVERSE.items() if why is not None}
    assert report["abstract_coverage"]["unreachable"] == unreachable
    printed = " ".join(res.output.split())  # the console wraps long lines
    assert "reachable abstract-state cells reached" in printed
    for name, why in unreachable.items():
        assert name in printed and f"unreachable ({' '.join(why.split())})" in printed, name
