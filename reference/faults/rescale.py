"""Faults in restoring state at other parallelisms."""

from __future__ import annotations

from typing import Any

from cutcheck.reference.faults.seams import Fault, Layer


class SkipStatelessReassignment(Fault):
    """A stateless vertex gets no channel state on rescale (state assignment skips vertices without operator state)."""

    name, seam, layer, key = ("skip-stateless-reassignment", "channel_state_to_assign", Layer.RESCALE, "FLINK-31963")

    def rule(self, correct: Any, edge: Any, vchannels: dict[Any, Any], stateless: set[str]) -> dict[Any, Any]:
        return {k: ([] if edge.target in stateless else inp, [] if edge.source in stateless else outp)
                for k, (inp, outp) in vchannels.items()}


class NoRescaleFilter(Fault):
    """Ambiguous channel state is delivered unfiltered on rescale (no virtual-channel record filter)."""

    name, seam, layer, key = "no-rescale-filter", "filters_ambiguous_channel_state", Layer.RESCALE, "FLINK-19801"

    def rule(self, correct: Any) -> bool:
        return False
