"""``cutcheck flink hunt``: a differential campaign of a real Flink release against the proved model.

* ``case``: the hunt case (graph, mode, failure, rescale) and its JSON, the unit of replay.
* ``risk``: drawing cases weighted by the model's own analysis of where they are risky.
* ``runners``: the model's prediction, and the CaseRunner protocol with two implementations
  (real Flink; the engine with a planted fault standing in for a Flink with a bug).
* ``observe``: one case on this process's Flink, as JSON (also run inside other releases' environments).
* ``classify``: comparison and the classes of disagreement; ``shrink``: reproducers; ``campaign``:
  the loop, reruns and the report; ``artifacts``: the files a finding leaves (case, script).
"""

from __future__ import annotations

from cutcheck.flink_bridge.hunt.campaign import Finding, Hunt, HuntReport, replay
from cutcheck.flink_bridge.hunt.case import HuntCase
from cutcheck.flink_bridge.hunt.classify import Disagreement, Kind
from cutcheck.flink_bridge.hunt.runners import (
           CaseRunner,
           EngineCaseRunner,
           FlinkCaseRunner,
           Prediction,
           predict,
)

__all__ = ["CaseRunner", "Disagreement", "EngineCaseRunner", "Finding", "FlinkCaseRunner", "Hunt", "HuntCase",
           "HuntReport", "Kind", "Prediction", "predict", "replay"]
