"""The reference engine: deterministic runs of job graphs with checkpoints, failures and restores.

``simulate(scenario, out_dir=None, seed=None)`` runs a scenario and returns a ``RunResult``.
"""

from cutcheck.reference.scenario import Scenario
from cutcheck.reference.simulate import RunResult, replay_command, simulate

__all__ = ["RunResult", "Scenario", "replay_command", "simulate"]
