"""The cells of the abstract coverage (``reference.fuzzing.abstract_coverage``): every cell a run may
reach, and for the ones no correct run can reach, the reason (from the engine's rules and the
generator's draws). ``ABSTRACT_UNIVERSE`` maps each cell to ``None`` (reachable) or its reason."""

from __future__ import annotations

from itertools import combinations

from cutcheck.model.partitioning import PARTITIONERS
from cutcheck.reference.fuzzing.cancelling import CANCEL
from cutcheck.reference.fuzzing.converting import TIMEOUT
from cutcheck.reference.fuzzing.finishing import FINISH
from cutcheck.reference.fuzzing.swarm import REPORTED, Feature

# A shared file of a checkpoint the job restored without claiming it falls out of use: the registry must
# keep it, as the job does not own it (FLINK-26985's moment; ``AbstractObserver``).
RESTORED_RELEASED: tuple[str, str, str] = ("ownership", "restored-released", "")

Cell = tuple[str, str, str]

PENDING = ("0", "1", "2+")
CHANNEL_STATES = tuple(f"{p}/{n}" for p in ("idle", "persisting") for n in PENDING)
COUNTS = ("0", "1", "2+")
BARRIERS = {"priority": "a priority barrier overtaking {n} buffer(s) queued behind it",
            "aligned": "an aligned barrier queued behind {n} buffer(s)"}
STALE = {
    "at-sender": "a barrier of an expired or aborted checkpoint still queued at its sender while a newer one is pending",
    "at-receiver": "a stale priority barrier among a receiver's priority events while a newer checkpoint is pending",
    "meets-persisting": "a stale barrier reaching a channel that persists the newer checkpoint (FLINK-21104's order)",
    "records-behind": ("records crossing a channel after its handler handled a stale barrier there, while the channel "
                       "persists the newer checkpoint, which then completes (the records FLINK-21104 lost)"),
    "persisting-aborted": ("a channel still persisting for a checkpoint the coordinator aborted (its task was only "
                           "told; the channel-state writer discards what it persists, FLINK-17869's situation)"),
}
ORDER = {
    "newer-first": "a checkpoint completing while an older one is pending (acks crossed; the older one is subsumed)",
    "ack-late": "an acknowledgement reaching the coordinator after its checkpoint ended (dropped)",
}
SIDES = ("input", "output")
HANDOVER = {side: (f"restored {side} state of a key and split on one channel of a keyed gate while another channel's "
                   "sender holds new records of them (a rescale handed the split to another producer)")
            for side in SIDES}
BATCH_ONLY = frozenset({Feature.BLOCKING})
# Features features_of reports only for streaming jobs (a batch job takes no checkpoints).
CHECKPOINTING = frozenset({Feature.UNALIGNED, Feature.ALIGNED_TIMEOUT, Feature.CONCURRENT, Feature.EXPIRY,
                           Feature.FINITE_TOLERANCE, Feature.RETAINED, Feature.SAVEPOINT, Feature.STORAGE,
                           Feature.INCREMENTAL, Feature.INLINE_ZERO, Feature.CLAIM, Feature.RESUBMIT,
                           Feature.ACK_DELAY})

def count_class(n: int) -> str:
    return COUNTS[min(n, 2)]


def _restore_unreachable(partitioner: str, side: str) -> str | None:
    info = PARTITIONERS[partitioner]
    if not info.supports_unaligned:
        return (f"{partitioner} edges are forced aligned (facts §3.7): no checkpoint holds their in-flight data, so no "
                f"restore installs {side} state on them")
    return None


def _pair_unreachable(a: Feature, b: Feature) -> str | None:
    pair = {a, b}
    if pair & BATCH_ONLY and pair & CHECKPOINTING:
        return "a batch job (blocking exchanges) takes no checkpoints, so no checkpointing feature is reported with it"
    if pair == {Feature.UNALIGNED, Feature.ALIGNED_TIMEOUT}:
        return "a scenario has one checkpointing mode"
    if Feature.CONCURRENT in pair and pair & {Feature.UNALIGNED, Feature.ALIGNED_TIMEOUT}:
        return "concurrent checkpoints are drawn for aligned mode only (Flink allows one unaligned checkpoint in flight)"
    if Feature.RESUBMIT in pair and pair & {Feature.RESCALE, Feature.RESCALE_SEVERAL, Feature.REFUSABLE_RESCALE}:
        return "a resubmit is drawn only for scenarios without rescales (their output credit across a restore is open work)"
    if pair & BATCH_ONLY and pair & {Feature.RESCALE, Feature.REFUSABLE_RESCALE}:
        return "rescales are drawn for streaming jobs only (a rescale restores a checkpoint, and a batch job takes none)"
    if Feature.AT_LEAST_ONCE_SINK in pair and pair & {Feature.UNALIGNED, Feature.ALIGNED_TIMEOUT, Feature.CONCURRENT,
                                                      Feature.BLOCKING}:
        return ("at-least-once sinks are drawn only in streaming jobs with at-least-once checkpointing (an exactly-once "
                "job's verdict counts their duplicates as a finding), which is neither unaligned, aligned with a timeout, "
                "concurrent (aligned only) nor a batch job")
    return None


def _channel_unreachable(a: str, b: str = "") -> str | None:
    """Why a channel state (``b`` empty) or a transition a -> b between two looks (one step apart) never
    happens in a correct run."""
    if "persisting/0" in (a, b):
        return ("a channel counts as persisting only while the checkpoint it persists for is pending (one persisting for "
                "an aborted checkpoint persists into nothing: the stale cell persisting-aborted), so with no checkpoint "
                "pending no channel persists")
    if a.endswith("/2+") and b == "persisting/1":
        return ("with two or more checkpoints pending, all but the oldest are savepoints (a periodic checkpoint waits while "
                "one is pending; only aligned mode, which persists nothing, draws concurrent ones), savepoints are "
                "aligned, and one leaves pending only subsumed by a newer savepoint or completed after every task took "
                "its barrier, which subsumes the older checkpoint: none leaves while a channel persists for that one")
    if a == "idle/0" and b.startswith("persisting/"):
        return ("a channel starts persisting when its task handles a barrier that crossed the network, at least two "
                "actions after the trigger, and the observer looks after every action: it sees the channel idle with "
                "the checkpoint pending first")
    return None


def _universe() -> dict[Cell, str | None]:
    cells: dict[Cell, str | None] = {}
    for state in CHANNEL_STATES:
        # A savepoint may be pending beside an unaligned checkpoint (persisting/2+); the observer looks
        # once per step, after timers and an action.
        cells["channel", state, ""] = _channel_unreachable(state)
    for a in CHANNEL_STATES:
        for b in CHANNEL_STATES:
            if a != b:
                cells["transition", a, b] = _channel_unreachable(a, b)
    for kind in BARRIERS:
        for n in COUNTS:
            cells["overtake", kind, n] = None
    for where in STALE:
        cells["stale", where, ""] = None
    for what in ORDER:
        cells["order", what, ""] = None
    for partitioner in PARTITIONERS:
        for side in SIDES:
            cells["restore", partitioner, side] = _restore_unreachable(partitioner, side)
    for side in HANDOVER:
        cells["handover", side, ""] = None
    for moment in FINISH:
        cells["finish", moment, ""] = None
    for moment in CANCEL:
        cells["cancel", moment, ""] = None
    for moment in TIMEOUT:
        cells["timeout", moment, ""] = None
    cells[RESTORED_RELEASED] = None
    features = sorted((f for f in Feature if f not in REPORTED or f in (Feature.UNALIGNED, Feature.ALIGNED_TIMEOUT)),
                      key=lambda f: f.value)
    for fa, fb in combinations(features, 2):
        cells["pair", fa.value, fb.value] = _pair_unreachable(fa, fb)
    return cells


ABSTRACT_UNIVERSE: dict[Cell, str | None] = _universe()


def cell_name(cell: Cell) -> str:
    family, what, how = cell
    if family == "channel":
        return f"channel {what}"
    if family == "transition":
        return f"channel {what} -> {how}"
    if family == "overtake":
        return f"{what} barrier vs {how} buffers"
    if family == "stale":
        return f"stale barrier {what}"
    if family == "order":
        return f"completion order {what}"
    if family == "restore":
        return f"restore {how} state on {what}"
    if family == "handover":
        return f"split handover on restored {what} state"
    if family == "finish":
        return f"last producer finishes: {what}"
    if family == "cancel":
        return f"cancel marker {what}"
    if family == "ownership":
        return "shared file of a checkpoint restored unclaimed falls out of use"
    if family == "timeout":
        return TIMEOUT[what]
    return f"pair {what} + {how}"


CELL_BY_NAME = {cell_name(c): c for c in ABSTRACT_UNIVERSE}
