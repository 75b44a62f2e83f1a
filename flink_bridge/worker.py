"""The worker: one Flink run (or several in a row) inside a release's environment, answered as JSON.

``python -m cutcheck.flink_bridge.worker --serve``, run by a prepared release's interpreter
(flink_bridge.launch starts it, with ``cutcheck`` importable through PYTHONPATH), reads one request per
line on standard input and answers on standard output, one JSON object per line:

* first ``{"ready": {"flink": "2.1.0", "python": "3.11.7"}}`` once PyFlink imports;
* per request ``{"graph": <job graph JSON>, "options": <RunOptions>, "work": "<dir>"}``: any number of
  ``{"progress": "..."}``, then ``{"result": <FlinkRun>}`` or ``{"error": {"type": "GraphError", "message": "..."}}``
  (a CutcheckError, re-raised as such by the parent) or ``{"crash": "<traceback>"}``;
* per request ``{"call": "cutcheck.module:function", "payload": <JSON>}``: the function's JSON answer as
  ``{"result": ...}``, or an error or crash as above (what a caller needs done beside the run, in the
  release: reading checkpoints with its own loader, say).

The run is flink_bridge.runner.run, unchanged: submit, arm the failure, resubmit after a rescale, collect
the REST statistics. The JVM (PyFlink's gateway) starts with the first run and serves the next ones.
Anything else that writes to standard output (the JVM, PyFlink) is sent to standard error, which the
parent keeps in a log file. ``python -m cutcheck.flink_bridge.worker REQUEST.json RESULT.json`` does
one request from a file, for debugging by hand.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import sys
import traceback
from typing import IO, Any

from cutcheck.flink_bridge.liveness import Liveness
from cutcheck.flink_bridge.rest import FlinkCheckpoint, JobStats
from cutcheck.flink_bridge.runner import FlinkRun, JobRun, RunOptions
from cutcheck.model.errors import CutcheckError
from cutcheck.model.graph import JobGraph


def encode_options(opts: RunOptions) -> dict[str, Any]:
    return dataclasses.asdict(opts)


def decode_options(data: dict[str, Any]) -> RunOptions:
    return RunOptions(**data)


def _stats(data: dict[str, Any] | None) -> JobStats | None:
    if data is None:
        return None
    return JobStats(**{**data, "checkpoints": [FlinkCheckpoint(**c) for c in data["checkpoints"]]})


def encode_run(run: FlinkRun) -> dict[str, Any]:
    """A FlinkRun as JSON: graphs as cutcheck job-graph JSON, every other field as it is."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(run):
        value = getattr(run, f.name)
        if f.name == "graph":
            out[f.name] = value.to_json()
        elif f.name == "options":
            out[f.name] = encode_options(value)
        elif f.name == "liveness":  # a judged run cancelled at its deadline: its verdict and timeline
            out[f.name] = value.to_json() if value is not None else None
        elif f.name == "jobs":
            out[f.name] = [{**{g.name: getattr(j, g.name) for g in dataclasses.fields(j) if g.name not in ("graph", "stats")},
                            "graph": j.graph.to_json(),
                            "stats": dataclasses.asdict(j.stats) if j.stats else None} for j in value]
        else:
            out[f.name] = value
    return out


def decode_run(data: dict[str, Any]) -> FlinkRun:
    fields = dict(data)
    fields["graph"] = JobGraph.from_json(data["graph"])
    fields["options"] = decode_options(data["options"])
    fields["jobs"] = [JobRun(**{**j, "graph": JobGraph.from_json(j["graph"]), "stats": _stats(j["stats"])})
                      for j in data["jobs"]]
    fields["events"] = [tuple(e) for e in data["events"]]
    fields["liveness"] = Liveness.from_json(data["liveness"]) if data.get("liveness") else None
    return FlinkRun(**fields)


def call(target: str, payload: Any) -> Any:
    """``module:function`` of cutcheck applied to ``payload`` (JSON in, JSON out), in this process."""
    module, _, name = target.partition(":")
    if not module.startswith("cutcheck.") or not name:
        raise CutcheckError(f"{target!r}: the worker calls only functions of cutcheck, named module:function.")
    try:
        function = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise CutcheckError(f"{target!r}: no such function in this cutcheck.") from None
    return function(payload)


def observe_in_release(version: str | None, target: str, payload: Any) -> Any:
    """``call(target, payload)`` in apache-flink ``version``'s worker (flink_bridge.launch.call_in_release): the
    name flink_bridge.hunt looks for to run a case's observation in another release."""
    from cutcheck.flink_bridge.launch import call_in_release

    return call_in_release(version, target, payload)


def handle(request: dict[str, Any], send: Any) -> None:
    """One run, or one call; its answer (result, error or crash) through ``send``."""
    from cutcheck.flink_bridge import runner

    try:
        if "call" in request:
            send({"result": call(str(request["call"]), request.get("payload"))})
            return
        graph = JobGraph.from_json(request["graph"])
        run = runner.run(graph, request["work"], decode_options(request["options"]),
                         lambda msg: send({"progress": msg}))
        send({"result": encode_run(run)})
    except CutcheckError as exc:
        send({"error": {"type": type(exc).__name__, "message": str(exc)}})
    except Exception:  # a bug or a broken release: the parent reports it with this text
        send({"crash": traceback.format_exc()})


def _channel() -> IO[str]:
    """The protocol's stream: the real standard output, with fd 1 sent to standard error for everyone else."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def serve() -> int:
    proto = _channel()

    def send(message: dict[str, Any]) -> None:
        proto.write(json.dumps(message, default=str) + "\n")
        proto.flush()

    from cutcheck.flink_bridge.features import installed

    send({"ready": {"flink": installed().name, "python": ".".join(map(str, sys.version_info[:3]))}})
    for line in sys.stdin:
        if line.strip():
            handle(json.loads(line), send)
    return 0


def main(argv: list[str]) -> int:
    try:
        if argv == ["--serve"]:
            return serve()
        if len(argv) == 2:
            answers: list[dict[str, Any]] = []
            with open(argv[0]) as fh:
                handle(json.load(fh), answers.append)
            with open(argv[1], "w") as fh:
                json.dump(answers[-1], fh, default=str)
            return 0 if "result" in answers[-1] else 1
    except KeyboardInterrupt:
        return 130
    print("usage: python -m cutcheck.flink_bridge.worker --serve | REQUEST.json RESULT.json", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
