"""Recovery logs: Parquet datasets written in batches while the run goes, finalised atomically.

The run is written into a temporary sibling of ``<out>`` (``model.outputs.staging_dir``) and renamed
to ``<out>`` at the end (``model.outputs.replace_dir``), so a reader never sees a half-written run
directory. ``<out>`` must pass ``model.outputs.check_output_dir`` when the writer is created and
again when it is finalised: an existing directory is replaced only when it is a run directory
cutcheck wrote, holding nothing but what its manifest lists, and ``force`` is given, never the
working directory or a parent of it. The
temporary sibling is removed on any failure or interruption (``discard``).
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cutcheck.model.errors import CutcheckError
from cutcheck.model.logschema import DATASETS
from cutcheck.model.outputs import check_output_dir, mark, replace_dir, staging_dir, write_manifest
from cutcheck.reference.runtime.records import COUNT, KEY, OFFSET, RID, SPLIT, VALUE, Expectations, Record

BATCH_ROWS = 65_536
_TYPES = {"int64": pa.int64(), "int32": pa.int32(), "string": pa.string()}


def arrow_schema(dataset: str) -> pa.Schema:
    return pa.schema([pa.field(n, _TYPES[t], nullable) for n, t, nullable in DATASETS[dataset]])


class _Dataset:
    def __init__(self, root: Path, name: str):
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.schema = arrow_schema(name)
        self.columns: dict[str, list[Any]] = {f.name: [] for f in self.schema}
        self.part = 0
        self.rows = 0

    def add(self, row: dict[str, Any]) -> None:
        for name, col in self.columns.items():
            col.append(row.get(name))
        if len(next(iter(self.columns.values()))) >= BATCH_ROWS:
            self.flush()

    def flush(self, force: bool = False) -> None:
        n = len(next(iter(self.columns.values())))
        if n == 0 and not (force and self.part == 0):
            return
        table = pa.table({k: pa.array(v, type=self.schema.field(k).type) for k, v in self.columns.items()}, schema=self.schema)
        pq.write_table(table, self.dir / f"part-{self.part:05d}.parquet")
        self.part += 1
        self.rows += n
        for col in self.columns.values():
            col.clear()


class RunLogWriter:
    """Writes one run directory; ``force`` allows replacing a run directory cutcheck wrote earlier.

    ``in_place``: write straight into ``out`` instead of a staging sibling, for runs whose files must
    not move once written (Flink's checkpoint ``_metadata`` names its shared files by absolute path, so
    a run directory renamed after the run would hold checkpoints Flink cannot restore). ``out`` is then
    created at once with a provisional run.json (``"complete": false``), and an earlier run being
    replaced is set aside until this one is whole; on any failure or interruption ``out`` is removed
    and the earlier run put back."""

    def __init__(self, out_dir: str | Path, *, force: bool = False, in_place: bool = False):
        self.out = check_output_dir(out_dir, force=force)  # before anything is created
        self.force = force
        self._staging: AbstractContextManager[Path] | None = None
        self._old: Path | None = None
        self._in_place = False
        try:
            if in_place:
                self.tmp = self._open_in_place()
            else:
                self._staging = staging_dir(self.out)
                self.tmp = self._staging.__enter__()
        except OSError as exc:
            self._staging = None
            raise CutcheckError(f"{self.out}: cannot create the run directory ({exc.strerror}); choose a writable --out.") from None
        try:
            self.data = {name: _Dataset(self.tmp, name) for name in DATASETS}
        except BaseException:
            self.discard()
            raise
        out = self.data["output"]
        self._out_cols = out.columns

    def _open_in_place(self) -> Path:
        if self.out.exists():  # a run cutcheck wrote, and force was given (check_output_dir)
            self._old = self.out.with_name(f".{self.out.name}.old-{os.getpid()}")
            self.out.rename(self._old)
        self.out.mkdir(parents=True)
        self._in_place = True
        (self.out / "run.json").write_text(json.dumps(mark({"complete": False, "in_progress": True}), indent=2) + "\n")
        return self.out

    def event(self, step: int, attempt: int, kind: str, detail: str) -> None:
        self.data["events"].add({"step": step, "attempt": attempt, "kind": kind, "detail": detail})

    def output(self, rows: list[Record], sink: str, txn: str, cp: int, attempt: int, seq: int,
               counter: str | None, lane: str | None) -> None:
        c = self._out_cols
        for rec in rows:
            c["rid"].append(rec[RID])
            c["key"].append(rec[KEY])
            c["value"].append(rec[VALUE])
            c["count"].append(rec[COUNT] if counter is not None else None)
            c["split"].append(rec[SPLIT])
            c["offset"].append(rec[OFFSET])
            c["sink_subtask"].append(sink)
            c["txn"].append(txn if cp >= 0 else None)
            c["checkpoint_id"].append(cp if cp >= 0 else None)
            c["attempt"].append(attempt)
            c["commit_seq"].append(seq)
            c["counter"].append(counter)
            c["lane"].append(lane)
        if len(c["rid"]) >= BATCH_ROWS:
            self.data["output"].flush()

    def write_input(self, expect: Expectations, copies: Any) -> None:
        ds = self.data["input"]
        for name, layout in expect.layouts.items():
            period, table = copies(name)
            for j, rec in enumerate(layout.all_records()):
                ds.add({"rid": rec[RID], "source": name, "split": rec[SPLIT], "offset": rec[OFFSET], "key": rec[KEY],
                        "value": rec[VALUE], "copies": table[j % period]})

    def checkpoint(self, stats: Any) -> None:
        self.data["checkpoints"].add({
            "id": stats.cp, "attempt": stats.attempt, "kind": stats.kind, "status": stats.status,
            "trigger_step": stats.trigger_step, "end_step": stats.end_step, "alignment_steps": stats.alignment_steps,
            "input_state_records": stats.input_state_records, "output_state_records": stats.output_state_records,
            "state_bytes": stats.state_bytes, "inflight_bytes": stats.inflight_bytes, "buffer_size": stats.buffer_size or None,
        })

    def finalize(self, run_json: dict[str, Any]) -> Path:
        """Flush, write run.json (marked as cutcheck's), and rename the run into place."""
        try:
            for ds in self.data.values():
                ds.flush(force=True)
            text = json.dumps(mark(run_json), indent=2, sort_keys=True, default=str) + "\n"
            (self.tmp / "run.json").write_text(text)
            if self._staging is not None:
                replace_dir(self.tmp, self.out, force=self.force)  # writes the manifest of what it holds
            else:
                write_manifest(self.out)  # in place: everything in it was written by this run
        except BaseException:
            self.discard()
            raise
        staging, self._staging = self._staging, None
        if staging is not None:
            staging.__exit__(None, None, None)  # the staging directory is now ``out``
        if self._old is not None:
            shutil.rmtree(self._old, ignore_errors=True)
            self._old = None
        return self.out

    def discard(self) -> None:
        """Remove the temporary run directory (after a failure or an interruption); in place, remove
        ``out`` (this writer created it) and put back the run it was replacing."""
        if self._staging is not None:
            self._staging = None
            shutil.rmtree(self.tmp, ignore_errors=True)
        elif self._in_place:
            self._in_place = False
            shutil.rmtree(self.out, ignore_errors=True)
            if self._old is not None:
                self._old.rename(self.out)
                self._old = None
