"""The generator's draw of a scenario's ``resubmit`` section (docs/scenarios.md): the job runs, then
is resubmitted from its own latest retained checkpoint or savepoint, in claim or no_claim mode.

Only a scenario with on-disk storage may carry it (the caller decides when to add it); "savepoint"
is drawn only for a scenario that schedules savepoints (without one the run would report the
resubmit skipped, a scenario wasted).
"""

from __future__ import annotations

from cutcheck.model.kinds import RestoreMode, values
from cutcheck.reference.fuzzing.swarm import Draw, choice
from cutcheck.reference.storage.config import ResubmitFrom

# First entries are what a shrinking driver falls back to: Flink's defaults (a checkpoint, no_claim).
SOURCES = (ResubmitFrom.CHECKPOINT.value, ResubmitFrom.SAVEPOINT.value)
MODES = (RestoreMode.NO_CLAIM.value, RestoreMode.CLAIM.value)
assert set(SOURCES) == set(values(ResubmitFrom)) and set(MODES) == set(values(RestoreMode))


def resubmit_section(d: Draw, savepoints: bool = True) -> dict[str, str]:
    """``{"from": checkpoint | savepoint, "mode": claim | no_claim}``."""
    return {"from": choice(d, SOURCES if savepoints else SOURCES[:1]), "mode": choice(d, MODES)}
