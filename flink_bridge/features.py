"""What each Flink release does differently, in one table: configuration keys and checkpointing rules.

Everything per release that the translation, the runner, the standalone script and the hunt's
predictions need lives here, each row with its source (see docs/flink-facts.md). A release is a
``(major, minor, patch)`` tuple; rows are "from this release on", the newest row at or below the
release applies. Where a row was checked in a release's own classes rather than its docs, the
source says so.

Configuration keys: FLIP-406 ("Reorganize State & Checkpointing & Recovery Configuration") renamed
the checkpointing and recovery keys in 1.20, keeping the old ones as deprecated fallbacks; 2.0
removed the fallbacks. So 1.19 gets the old keys, 1.20 and later the new ones.

Custom partitioners under unaligned checkpoints:

* every release from 1.19 to 2.3: ``StreamingJobGraphGenerator.preValidate`` refuses a job with
  unaligned checkpoints enabled and a custom partitioner anywhere, unless
  ``execution.checkpointing.unaligned.forced`` is set (the message ends "The user can force
  Unaligned Checkpoints by using 'execution.checkpointing.unaligned.forced'"); checked in the 2.3.0
  classes of the apache-flink wheel, and in 1.19's source per docs/flink-facts.md §2.2;
* 2.x: ``CustomPartitionerWrapper``'s constructor disables unaligned checkpoints on its edge, and the
  stream-graph generator then marks every input edge of the consuming node as not supporting them
  (forced aligned barriers): the reference engine's rule (model.execution.edge_supports_unaligned).
  Checked in the 2.3.0 classes (``StreamPartitioner.disableUnalignedCheckpoints``, called from the
  constructor; ``StreamGraphGenerator.generate`` tests ``isSupportsUnalignedCheckpoint``);
* 1.19: the partitioner has no such switch, so a forced job checkpoints custom edges unaligned and
  redistributes their in-flight data with the FULL downstream mapper (facts §2.2, §3.7); 1.20's
  classes were not checked and are taken to be 1.19's (the switch arrived with the sink work of
  FLINK-36287, merged for 2.0).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum, unique

from cutcheck.model.errors import CutcheckError
from cutcheck.model.graph import JobGraph
from cutcheck.model.partitioning import supports_unaligned

Release = tuple[int, int, int]
OLDEST: Release = (1, 19, 0)


@unique
class Key(StrEnum):
    """The job configuration options whose key depends on the release."""

    CHECKPOINT_DIR = "checkpoint_dir"
    RETAINED = "retained"
    INCREMENTAL = "incremental"
    INLINE_THRESHOLD = "inline_threshold"
    UNALIGNED = "unaligned"
    ALIGNED_TIMEOUT = "aligned_timeout"
    RESTORE_PATH = "restore_path"
    CLAIM_MODE = "claim_mode"
    SAVEPOINT_DIR = "savepoint_dir"


_KEYS_1_19 = {
    Key.CHECKPOINT_DIR: "state.checkpoints.dir",
    Key.RETAINED: "state.checkpoints.num-retained",
    Key.INCREMENTAL: "state.backend.incremental",
    Key.INLINE_THRESHOLD: "state.storage.fs.memory-threshold",
    Key.UNALIGNED: "execution.checkpointing.unaligned",
    Key.ALIGNED_TIMEOUT: "execution.checkpointing.aligned-checkpoint-timeout",
    Key.RESTORE_PATH: "execution.savepoint.path",
    Key.CLAIM_MODE: "execution.savepoint-restore-mode",
    Key.SAVEPOINT_DIR: "state.savepoints.dir",
}
_KEYS_1_20 = {
    Key.CHECKPOINT_DIR: "execution.checkpointing.dir",
    Key.RETAINED: "execution.checkpointing.num-retained",
    Key.INCREMENTAL: "execution.checkpointing.incremental",
    Key.INLINE_THRESHOLD: "execution.checkpointing.data-inline-threshold",
    Key.UNALIGNED: "execution.checkpointing.unaligned.enabled",
    Key.ALIGNED_TIMEOUT: "execution.checkpointing.aligned-checkpoint-timeout",
    Key.RESTORE_PATH: "execution.state-recovery.path",
    Key.CLAIM_MODE: "execution.state-recovery.claim-mode",
    Key.SAVEPOINT_DIR: "execution.checkpointing.savepoint-dir",
}


@dataclass(frozen=True, slots=True)
class Features:
    """One release's behaviour where releases differ."""

    release: Release
    keys: dict[Key, str]
    # preValidate refuses unaligned checkpoints with a custom partitioner unless unaligned.forced is set
    custom_needs_forced: bool
    # a custom edge disables unaligned checkpoints on itself (and so on every input of its consumer)
    custom_edge_aligned: bool
    source: str

    def key(self, option: Key) -> str:
        return self.keys[option]

    @property
    def name(self) -> str:
        return ".".join(map(str, self.release))


_ROWS: tuple[Features, ...] = (
    Features((1, 19, 0), _KEYS_1_19, True, False, "1.19 source per docs/flink-facts.md §2.2, §3.7"),
    Features((1, 20, 0), _KEYS_1_20, True, False, "FLIP-406 keys; custom edges as 1.19 (classes not checked)"),
    Features((2, 0, 0), _KEYS_1_20, True, True, "CustomPartitionerWrapper disables UC (checked in 2.3.0 classes)"),
)


def parse_release(text: str) -> Release:
    """'2.1.0' -> (2, 1, 0); a missing patch is 0. Raises CutcheckError (one sentence) otherwise."""
    parts = text.strip().split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise CutcheckError(f"Flink release {text!r} is not a version like 2.1.0; give MAJOR.MINOR.PATCH.")
    major, minor, patch = (int(p) for p in [*parts, "0"][:3])
    return (major, minor, patch)


def features(release: Release | str) -> Features:
    """The table's row for ``release`` (the newest row at or below it)."""
    rel = parse_release(release) if isinstance(release, str) else release
    if rel < OLDEST:
        raise CutcheckError(f"Flink {'.'.join(map(str, rel))} is older than 1.19, the oldest release cutcheck knows the "
                            "configuration of (and 1.18 and older publish no wheels for Python 3.11); use 1.19 or newer.")
    row = [r for r in _ROWS if r.release <= rel][-1]
    return Features(rel, row.keys, row.custom_needs_forced, row.custom_edge_aligned, row.source)


def installed() -> Features:
    """The row of the PyFlink this process imports (the flink extra's release)."""
    import re

    from pyflink.version import __version__

    found = re.match(r"\d+\.\d+(\.\d+)?", __version__)  # 2.1.0.post1, 2.2.0rc1, ... -> the release
    if found is None:
        raise CutcheckError(f"the installed PyFlink reports version {__version__!r}, which names no Flink release.")
    return features(found.group(0))


def unaligned_edges(graph: JobGraph, release: Features, forced: bool = True) -> frozenset[int]:
    """Keys of the edges whose barriers a release lets overtake data under unaligned checkpoints.

    Flink decides per consuming node (facts §3.7): when any input edge of a node cannot carry
    unaligned barriers, none of that node's inputs does. Pointwise and broadcast edges never can.
    A custom edge cannot in 2.x (its partitioner disables it); in 1.19 and 1.20 it can once the job is
    forced (``forced``, which flink_bridge.runner sets whenever a custom edge meets unaligned
    checkpoints). For 2.x this is the engine's rule (model.execution.edge_supports_unaligned)."""
    def capable(partitioner: str) -> bool:
        if partitioner == "custom":
            return forced and not release.custom_edge_aligned
        return supports_unaligned(partitioner)

    return frozenset(e.key for e in graph.edges if all(capable(o.partitioner) for o in graph.in_edges(e.target)))
