"""Further Flink configuration for ``cutcheck flink run`` (``--conf KEY=VALUE``): parsed, checked, and where it goes.

A pair reaches both the job's configuration (flink_bridge.runner.job_config) and the cluster's (the MiniCluster,
or the JVMs of ``--kill-after-checkpoint``), since some keys are read only by the cluster
(``taskmanager.network.memory.buffers-per-channel``, ``taskmanager.memory.segment-size``, ...) and others only by the
job (``execution.buffer-timeout``); a key one side does not know is ignored there. With ``--flink VERSION`` the
options travel to the release's worker as they are (flink_bridge.worker), which builds both configurations the
same way, so a pair reaches that release's job and cluster too.

Refused before Flink starts, each in one sentence: a pair that is not ``KEY=VALUE``, a key given twice with two
values, a key the bridge sets from one of its own options (the sentence names the option), and a key the bridge
needs as it sets it (the REST address it polls, the interpreter its functions run in, ...). The keys the bridge
only gives a default (the small network buffers of flink_bridge.env.CLUSTER_DEFAULTS, the restart strategy's
attempts and delay) may be given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from cutcheck.flink_bridge.features import Key, features
from cutcheck.model.errors import CutcheckError

CHECKPOINT_TIMEOUT = "execution.checkpointing.timeout"
TOLERABLE_FAILED = "execution.checkpointing.tolerable-failed-checkpoints"
FORCED = "execution.checkpointing.unaligned.forced"
# How often the REST API's metrics (records read per task) are refreshed; 10 s by default (Flink's MetricOptions).
# A judged run (RunOptions.judge_deadline) samples them once a second, so it asks for that.
FETCHER_INTERVAL = "metrics.fetcher.update-interval"

# Keys set from an option of `cutcheck flink run`: the option to give instead.
_BY_OPTION: dict[str, str] = {
    "execution.checkpointing.interval": "--interval-ms",
    CHECKPOINT_TIMEOUT: "--checkpoint-timeout-ms",
    TOLERABLE_FAILED: "--tolerable-failed-checkpoints",
    "state.backend.type": "--incremental",
    "restart-strategy.type": "--no-restart",
    "$internal.pipeline.job-id": "--job-id",
}
for _keys in (features("1.19.0").keys, features("2.0.0").keys):  # both spellings: --flink may run either
    _BY_OPTION.update({
        _keys[Key.UNALIGNED]: "--mode", _keys[Key.ALIGNED_TIMEOUT]: "--alignment-timeout-ms",
        _keys[Key.RETAINED]: "--retained", _keys[Key.CHECKPOINT_DIR]: "--checkpoint-dir",
        _keys[Key.SAVEPOINT_DIR]: "--checkpoint-dir (savepoints go beside the checkpoints)",
        _keys[Key.INCREMENTAL]: "--incremental", _keys[Key.INLINE_THRESHOLD]: "--incremental",
        _keys[Key.RESTORE_PATH]: "--savepoint", _keys[Key.CLAIM_MODE]: "--claim-mode",
    })

# Keys the bridge needs as it sets them: why, in a few words.
_BRIDGE_NEEDS: dict[str, str] = {
    "execution.target": "it submits the job to its own cluster",
    "rest.address": "it polls its cluster's REST API",
    "rest.port": "it polls its cluster's REST API",
    "rest.bind-address": "it polls its cluster's REST API",
    "rest.bind-port": "it polls its cluster's REST API",
    "rest.cache.checkpoint-statistics.timeout": "it arms failures on fresh checkpoint statistics",
    "web.checkpoints.history": "it reads every checkpoint's statistics",
    "jobstore.expiration-time": "it reads a finished job's statistics",
    FETCHER_INTERVAL: "it samples the records at the sinks once a second",
    "execution.runtime-mode": "the job is a streaming job",
    "python.execution-mode": "its functions run in the TaskManager's JVM",
    "python.executable": "its functions run in this interpreter",
    "python.pythonpath": "its functions import cutcheck",
    "python.operator-chaining.enabled": "each function keeps an operator and a uid of its own",
    "execution.checkpointing.mode": "the exactly-once check needs EXACTLY_ONCE",
    "execution.checkpointing.max-concurrent-checkpoints": "unaligned checkpoints need 1",
    "execution.checkpointing.externalized-checkpoint-retention": "it keeps the checkpoints of a cancelled job",
}
# With --kill-after-checkpoint the cluster runs in JVMs of its own (flink_bridge.process_cluster), which fix
# their addresses, slots and memory after any configuration given: such a key would be silently overridden.
_PROCESS_CLUSTER_FIXED = ("jobmanager.", "heartbeat.", "blob.", "taskmanager.host", "taskmanager.bind-host",
                          "taskmanager.numberOfTaskSlots", "taskmanager.cpu.cores", "taskmanager.memory.network.",
                          "taskmanager.memory.framework.", "taskmanager.memory.task.", "taskmanager.memory.managed.",
                          "taskmanager.memory.jvm-")
_KEY = re.compile(r"[A-Za-z0-9$][A-Za-z0-9_.$-]*")


def parse_conf(pairs: Iterable[str] | None) -> dict[str, str]:
    """``["k=v", ...]`` as a dict; a malformed pair or a key given twice with two values is refused."""
    conf: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not _KEY.fullmatch(key) or not value:
            raise CutcheckError(f"--conf {pair!r} is not KEY=VALUE with a Flink configuration key and a value; "
                                "give it as e.g. --conf taskmanager.network.memory.buffers-per-channel=2.")
        if conf.get(key, value) != value:
            raise CutcheckError(f"--conf {key} is given twice ({conf[key]!r} and {value!r}); give it once.")
        conf[key] = value
    return conf


def check_conf(conf: dict[str, str], process_cluster: bool = False) -> None:
    """Refuse (one sentence) a key the bridge sets itself, naming the option that sets it."""
    for key, value in conf.items():
        if not _KEY.fullmatch(key) or not isinstance(value, str) or not value:
            raise CutcheckError(f"--conf {key}={value!r}: not a Flink configuration key with a value.")
        if key == FORCED:
            forced_unaligned(conf)  # allowed (the finding's README tries it); job_config lets it override its own
            continue
        if key in _BY_OPTION:
            raise CutcheckError(f"--conf {key}: the bridge sets this key from {_BY_OPTION[key]}; give that option instead.")
        if key in _BRIDGE_NEEDS:
            raise CutcheckError(f"--conf {key}: the bridge sets this key itself ({_BRIDGE_NEEDS[key]}); leave it out.")
        if process_cluster and key.startswith(_PROCESS_CLUSTER_FIXED):
            raise CutcheckError(f"--conf {key}: with --kill-after-checkpoint the cluster's JVMs fix this key "
                                "themselves; leave it out or run without --kill-after-checkpoint.")


def forced_unaligned(conf: dict[str, str]) -> bool | None:
    """``execution.checkpointing.unaligned.forced`` given with --conf, as RunOptions.force_unaligned (None: not given)."""
    if FORCED not in conf:
        return None
    value = conf[FORCED].lower()
    if value not in ("true", "false"):
        raise CutcheckError(f"--conf {FORCED}={conf[FORCED]!r}: give true or false.")
    return value == "true"


def described(opts: Any) -> dict[str, Any]:
    """A run's limits and further configuration (RunOptions), as its summary JSON shows them."""
    return {"deadline_s": opts.timeout_s, "judged_at_deadline": opts.judge_deadline,
            "checkpoint_timeout_ms": opts.checkpoint_timeout_ms, "tolerable_failed_checkpoints": opts.tolerable_failed,
            "alignment_timeout_ms": opts.alignment_timeout_ms if opts.mode == "aligned_timeout" else None,
            "conf": dict(sorted(opts.conf.items()))}
