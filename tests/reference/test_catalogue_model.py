"""The model and the engine agree on their mutants: one list of names, and the same bug on both sides.

The model (and its Z3 proofs) runs the catalogue's faults that change one channel's protocol; their
names are ``model.protocol.ModelMutant``, which the catalogue takes them from. Agreeing on the list
is more than sharing spellings: for each of them, the correct model rejects the faulty engine's
traces as steps or observations it would not take, while the model with the same mutant accepts
every step and observation of them (only the CUT invariant, which the bug breaks, still fails), and
Z3 finds a counterexample to CUT's induction with the mutant where it proves CUT without it.
"""

from __future__ import annotations

import contextlib
from collections import Counter

import pytest

from cutcheck.model.errors import CutcheckError, InvariantViolation
from cutcheck.model.protocol import PROTOCOL_MUTANTS, ModelMutant, Protocol
from cutcheck.proofs import REGISTRY, names
from cutcheck.proofs.cut import check_induction
from cutcheck.reference import Scenario
from cutcheck.reference.batch import make_engine
from cutcheck.reference.checks.tracing import validate_run
from cutcheck.reference.faults.catalogue import CATALOGUE, MUTANTS
from cutcheck.reference.fuzzing.generate import SeedDraw, scenario_dict


def test_every_model_mutant_is_a_scored_catalogue_fault() -> None:
    assert tuple(m.value for m in ModelMutant) == PROTOCOL_MUTANTS and len(ModelMutant) == 4
    for m in ModelMutant:
        assert m.value in MUTANTS and type(CATALOGUE[m.value].name) is str, m


def test_the_model_refuses_every_other_fault_by_name() -> None:
    others = [n for n in CATALOGUE if n not in PROTOCOL_MUTANTS]
    assert others
    for name in others:
        with pytest.raises(CutcheckError, match="unknown mutant .* for the channel model"):
            Protocol("unaligned", name)
    assert all(Protocol("unaligned", m).mutant == m.value for m in ModelMutant)


def test_the_z3_proofs_have_one_negative_control_per_model_mutant() -> None:
    controls = {name.split("[", 1)[1].rstrip("]"): REGISTRY[name].expected for name in names()
                if name.startswith("cut-unaligned[")}
    assert controls == dict.fromkeys(PROTOCOL_MUTANTS, "counterexample")


@pytest.mark.parametrize("mutant", list(ModelMutant))
def test_z3_refutes_cut_with_the_mutant_and_proves_it_without(mutant: ModelMutant) -> None:
    status, _ = check_induction(Protocol("unaligned", mutant, gate=1))
    assert status == "counterexample"
    assert check_induction(Protocol("unaligned", gate=1))[0] == "proved"


@pytest.mark.parametrize("mutant", list(ModelMutant))
def test_the_faulty_engine_runs_the_model_mutant_and_not_the_correct_protocol(mutant: ModelMutant) -> None:
    for seed in range(60):
        sdict = scenario_dict(SeedDraw(seed), modes=("unaligned",), max_records=150, rescale=False, batch=False)
        sdict["mutants"] = [mutant.value]
        engine = make_engine(Scenario.from_json(sdict), trace=True)
        engine.cut_checks = False  # the traces, not the engine's own CUT check, are what is compared
        with contextlib.suppress(InvariantViolation):
            engine.run()
        books = [*engine.trace_archive, engine.traces]
        correct = Counter(f.kind for f in validate_run(books))
        if not correct:
            continue
        assert set(correct) - {"cut"}, (seed, correct)  # the correct protocol would not step or observe so
        same = Counter(f.kind for f in validate_run(books, mutant.value))
        assert set(same) <= {"cut"}, (seed, same)  # the mutant model steps and observes just as the engine did
        return
    pytest.fail(f"no trace of the {mutant} engine was rejected in 60 scenarios")
