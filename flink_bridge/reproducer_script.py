"""A cutcheck case as a standalone PyFlink program (the template flink_bridge.standalone renders).

Run: python SCRIPT [--work DIR] [--keep] [--check-only]. Builds CASE's job graph (fixed uids), runs it on a
local MiniCluster with the case's checkpointing, throws its failure once after checkpoint N (or stops with a
savepoint), restores it (rescaled, in its claim mode), and checks the committed FileSink output: each record
as often as the graph's routes say, each key's counts exactly 1..n. Prints PASS or FAIL; exits 0, 1 (a
disagreement, work directory kept) or 2 (the run could not be carried out). Needs only PyFlink.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request

from pyflink.common import Configuration, Encoder, Row, Types, WatermarkStrategy
from pyflink.datastream import DataStream, KeyedStream, StreamExecutionEnvironment
from pyflink.datastream import functions as fn
from pyflink.datastream.connectors import file_system as fs
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor
from pyflink.java_gateway import get_gateway

CASE: dict = {}  # the case: filled in when the script is rendered
M64 = (1 << 64) - 1

def mix64(x: int) -> int:
    """SplitMix64's finaliser: the record keys."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)

class Probed:
    """The slow vertex's per-record delay and the failing vertex's once-only exception (marker files)."""
    def __init__(self, vid: str):
        self.setup(vid)

    def setup(self, vid: str) -> None:
        p = CASE["probe"]
        self.vid, self.delay = vid, (p["delay_ms"] / 1000.0 if vid == p["slow"] else 0.0)
        self.armed = p["armed"] if vid == p["fail_vertex"] else None
        self.fired, self.done = p["fired"], self.armed is None

    def open(self, ctx) -> None:  # noqa: ANN001
        try:
            self.subtask = ctx.get_index_of_this_subtask()
        except Exception:  # PyFlink 2.x thread mode: the Java method moved to getTaskInfo()
            self.subtask = int(ctx._runtime_context.getTaskInfo().getIndexOfThisSubtask())

    def tick(self) -> None:
        if self.delay:
            time.sleep(self.delay)
        if self.done or not os.path.exists(self.armed):
            return
        try:
            fd = os.open(self.fired, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            self.done = True
            return
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{self.vid}[{self.subtask}]\n")
        self.done = True
        raise RuntimeError(f"injected failure in {self.vid}[{self.subtask}]")

class Generate(Probed, fn.MapFunction):
    """Record j of a source: (rid, key, value, split, offset, count)."""
    def __init__(self, vid: str, lay: dict):
        self.setup(vid)
        self.lay = lay

    def map(self, j: int) -> tuple:
        self.tick()
        lay = self.lay
        key = mix64(lay["seed"] * 1_000_003 + j) % lay["keys"]
        return (lay["rid_base"] + j, key, j, lay["split_base"] + j % lay["splits"], j // lay["splits"], 0)

class Map(Probed, fn.MapFunction):
    """A map vertex (its value transformation), or a union vertex (identity: Flink's union is no operator)."""
    def __init__(self, vid: str, identity: bool = False):
        self.setup(vid)
        self.identity = identity

    def map(self, r: tuple) -> tuple:
        self.tick()
        return r if self.identity else (r[0], r[1], (r[2] * 31 + 7) & 0x7FFFFFFF, r[3], r[4], r[5])

class Filter(Probed, fn.FilterFunction):
    def __init__(self, vid: str, drop_every: int):
        self.setup(vid)
        self.drop_every = drop_every

    def filter(self, r: tuple) -> bool:
        self.tick()
        return r[0] % self.drop_every != 0

class AddKey(fn.MapFunction):
    def map(self, r: tuple) -> Row:
        return Row(r[1], r)

class Count(Probed, fn.KeyedProcessFunction):
    def open(self, ctx) -> None:  # noqa: ANN001
        Probed.open(self, ctx)
        self.state = ctx.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, r: tuple, ctx):  # noqa: ANN001
        self.tick()
        c = (self.state.value() or 0) + 1
        self.state.update(c)
        yield (r[0], r[1], r[2], r[3], r[4], c)

class CoIdentity(Probed, fn.CoMapFunction):
    def map1(self, r: tuple) -> tuple:
        self.tick()
        return r

    def map2(self, r: tuple) -> tuple:
        self.tick()
        return r

def broadcast_descriptor() -> MapStateDescriptor:
    return MapStateDescriptor("broadcast", Types.LONG(), Types.LONG())

class BroadcastApply(Probed):
    def process_element(self, r: tuple, ctx):  # noqa: ANN001
        self.tick()
        yield r

    def process_broadcast_element(self, r: tuple, ctx):  # noqa: ANN001
        self.tick()
        state = ctx.get_broadcast_state(broadcast_descriptor())
        state.put(r[0], (state.get(r[0]) or 0) + 1)
        yield r

class Broadcast(BroadcastApply, fn.BroadcastProcessFunction):
    """broadcast_state whose data input is not hash-partitioned."""
class KeyedBroadcast(BroadcastApply, fn.KeyedBroadcastProcessFunction):
    """broadcast_state whose data input is hash-partitioned."""
class Format(Probed, fn.MapFunction):
    def map(self, r: tuple) -> str:
        self.tick()
        return f"{r[0]},{r[1]},{r[2]},{r[5]},{r[3]},{r[4]},{self.subtask}"

def custom_partition(key: int, partitions: int) -> int:
    return key % partitions

def build(env, par: dict, work: str) -> None:  # noqa: ANN001, C901
    """The job graph as DataStream operators; ``par``: parallelism per vertex of this submission."""
    g, chaining = CASE["graph"], CASE["options"]["chaining"]
    rec = Types.TUPLE([Types.LONG()] * 6)
    keyed_row = Types.ROW([Types.LONG(), rec])
    vertices = {v["id"]: v for v in g["vertices"]}
    edges = [dict(e, key=i) for i, e in enumerate(g["edges"])]
    streams: dict = {}

    def pin(ds, uid: str, vid: str, head: bool = False):  # noqa: ANN001, ANN202
        ds = ds.uid(uid).name(uid).set_parallelism(par[vid]).set_max_parallelism(CASE["max_parallelism"][vid])
        return ds.start_new_chain() if head and not chaining else ds

    def partition(e: dict, vid: str):  # noqa: ANN202
        s, p = streams[e["from"]], e["partitioner"]
        if p == "global":
            return DataStream(getattr(s._j_data_stream, "global")())
        if p != "custom":
            return getattr(s, p)()
        out = s.partition_custom(custom_partition, lambda r: r[1])
        after = out._j_data_stream.getTransformation()
        before = after.getInputs().get(0).getInputs().get(0)
        uid = f"{vid}/custom{e['key']}"
        for t, suffix, end in ((before, "", e["from"]), (after, "/values", vid)):
            t.setUid(uid + suffix)
            t.setName(uid + suffix)  # PyFlink rewires operators it named itself, which fails before two-input ones
            t.setParallelism(par[end])
            t.setMaxParallelism(CASE["max_parallelism"][end])
        if not chaining:
            after.setChainingStrategy(get_gateway().jvm.org.apache.flink.streaming.api.operators.ChainingStrategy.HEAD)
        return out

    def merged(vid: str, ins: list):  # noqa: ANN202
        parts = [partition(e, vid) for e in ins]
        m = parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]
        return m if isinstance(m, DataStream) else DataStream(m._j_data_stream)

    def keyed(vid: str, ins: list):  # noqa: ANN202
        parts = [pin(streams[e["from"]].map(AddKey(), output_type=keyed_row), f"{vid}/key{e['key']}", e["from"]) for e in ins]
        u = parts[0].union(*parts[1:]) if len(parts) > 1 else parts[0]
        j = u._j_data_stream.keyBy(get_gateway().jvm.KeyByKeySelector(), Types.ROW([Types.LONG()]).get_java_type_info())
        return KeyedStream(j, rec, u)

    for vid in CASE["order"]:
        v = vertices[vid]
        kind, ins = v["kind"], [e for e in edges if e["to"] == vid]
        if kind == "source":
            lay = CASE["layouts"][vid]
            seq = env.from_source(NumberSequenceSource(0, max(lay["records"] - 1, 0)), WatermarkStrategy.no_watermarks(), f"{vid}/seq")
            streams[vid] = pin(pin(seq, f"{vid}/seq", vid, True).map(Generate(vid, lay), output_type=rec), vid, vid)
        elif kind == "keyed_count":
            streams[vid] = pin(keyed(vid, ins).process(Count(vid), output_type=rec), vid, vid, True)
        elif kind in ("co_map", "broadcast_state"):
            data, other = sorted(ins, key=lambda e: e["gate"])
            if kind == "co_map":
                out = merged(vid, [data]).connect(merged(vid, [other])).map(CoIdentity(vid), output_type=rec)
            elif data["partitioner"] == "hash":
                shared = streams[other["from"]].broadcast(broadcast_descriptor())
                out = keyed(vid, [data]).connect(shared).process(KeyedBroadcast(vid), output_type=rec)
            else:
                shared = streams[other["from"]].broadcast(broadcast_descriptor())
                out = merged(vid, [data]).connect(shared).process(Broadcast(vid), output_type=rec)
            streams[vid] = pin(out, vid, vid, True)
        else:
            m, head = merged(vid, ins), not any(e["partitioner"] == "custom" for e in ins)
            if kind == "map":
                streams[vid] = pin(m.map(Map(vid), output_type=rec), vid, vid, head)
            elif kind == "filter":
                streams[vid] = pin(m.filter(Filter(vid, v["drop_every"])), vid, vid, head)
            elif kind == "union":
                streams[vid] = pin(m.map(Map(vid, True), output_type=rec), vid, vid, head)
            elif kind == "sink":
                lines = pin(m.map(Format(vid), output_type=Types.STRING()), f"{vid}/format", vid, head)
                sink = (fs.FileSink.for_row_format(os.path.join(work, "sink", vid), Encoder.simple_string_encoder())
                        .with_bucket_assigner(fs.BucketAssigner.base_path_bucket_assigner())
                        .with_rolling_policy(fs.RollingPolicy.on_checkpoint_rolling_policy())
                        .with_output_file_config(fs.OutputFileConfig.builder().with_part_prefix("part").with_part_suffix(".csv").build())
                        .build())
                lines.sink_to(sink).uid(vid).name(vid).set_parallelism(par[vid])

def submit(port: int, par: dict, work: str, restart: bool, restore: str | None) -> str:
    o = CASE["options"]
    conf = dict(CASE["config"], **{"rest.port": str(port), "python.executable": sys.executable,
                                   "python.pythonpath": os.pathsep.join(p for p in sys.path if p and os.path.isdir(p)),
                                   "restart-strategy.type": "fixed-delay" if restart else "none"})
    conf[CASE["keys"]["checkpoint_dir"]] = "file://" + os.path.join(work, "checkpoints")
    conf[CASE["keys"]["savepoint_dir"]] = "file://" + os.path.join(work, "savepoints")
    if restore:
        conf[CASE["keys"]["restore_path"]] = restore
        conf[CASE["keys"]["claim_mode"]] = o["claim_mode"].upper()
    config = Configuration()
    for k, v in conf.items():
        config.set_string(k, v)
    j_env = get_gateway().jvm.org.apache.flink.streaming.api.environment.StreamExecutionEnvironment(config._j_configuration)
    env = StreamExecutionEnvironment(j_env)
    build(env, par, work)
    return str(env.execute_async(CASE["graph"].get("name", "cutcheck-case")).get_job_id())

def rest(port: int, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"{}")

def latest_completed(port: int, job: str) -> int:
    latest = (rest(port, f"/jobs/{job}/checkpoints").get("latest") or {}).get("completed") or {}
    return int(latest.get("id", 0))

def stop_with_savepoint(port: int, job: str, work: str, fmt: str) -> str:
    trigger = rest(port, f"/jobs/{job}/stop", {"targetDirectory": os.path.join(work, "savepoints"), "drain": False,
                                               "formatType": fmt.upper()})["request-id"]
    while True:
        status = rest(port, f"/jobs/{job}/savepoints/{trigger}")
        if status.get("status", {}).get("id") == "COMPLETED":
            op = status.get("operation", {})
            if "location" in op:
                return str(op["location"])
            trace = str((op.get("failure-cause") or {}).get("stack-trace", "")).splitlines()
            CASE["savepoint_failure"] = " | ".join(ln for ln in trace if "Caused by" in ln)[:600] or trace[0][:300]
            return ""  # the job runs on (a finished source subtask fails a savepoint); tried again on the next poll
        time.sleep(0.1)

def watch(port: int, job: str, first: bool) -> str:
    """Poll until the job ends, arming the failure or stopping with a savepoint once checkpoint N completed."""
    o, p = CASE["options"], CASE["probe"]
    while True:
        state = rest(port, f"/jobs/{job}")["state"]
        if state in ("FINISHED", "FAILED", "CANCELED"):
            return state
        if first and o["fail_after"] and not os.path.exists(p["armed"]) and latest_completed(port, job) >= o["fail_after"]:
            open(p["armed"], "w").close()
            print(f"checkpoint {o['fail_after']} completed: failure armed in {p['fail_vertex']}")
        if first and o["savepoint"] and not CASE.get("savepoint") and latest_completed(port, job) >= o["stop_after"]:
            CASE["savepoint"] = stop_with_savepoint(port, job, CASE["work"], o["savepoint"])
            print(f"stopped with a {o['savepoint']} savepoint: {CASE['savepoint']}" if CASE["savepoint"] else
                  f"the {o['savepoint']} savepoint failed ({CASE['savepoint_failure']}); trying again")
        time.sleep(0.1)

def latest_retained(work: str, job: str) -> str | None:
    base = os.path.join(work, "checkpoints", job)
    done = [int(n[4:]) for n in os.listdir(base) if n.startswith("chk-") and os.path.exists(os.path.join(base, n, "_metadata"))]
    return f"file://{base}/chk-{max(done)}" if done else None

def run(work: str) -> str | None:
    """Run the case; None when Flink ran it to the end, else why it did not (a refused restore)."""
    o, g = CASE["options"], CASE["graph"]
    par = {v["id"]: v["parallelism"] for v in g["vertices"]}
    target = dict(par, **o["rescale"])
    gw = get_gateway().jvm
    conf = gw.org.apache.flink.configuration.Configuration()
    for k, v in CASE["cluster"].items():
        conf.setString(k, v)
    slots = max(max(par.values()), max(target.values()))
    cfg = gw.org.apache.flink.runtime.minicluster.MiniClusterConfiguration.Builder().setConfiguration(conf) \
        .setNumTaskManagers(1).setNumSlotsPerTaskManager(slots).build()
    mini = gw.org.apache.flink.runtime.minicluster.MiniCluster(cfg)
    mini.start()
    try:
        port = int(mini.getRestAddress().get().getPort())
        in_place = not o["rescale"] and o["restart"]
        job = submit(port, par, work, in_place, o["restore"])
        print(f"job {job} running at {par}")
        state = watch(port, job, True)
        if o["fail_after"] and not os.path.exists(CASE["probe"]["fired"]):
            raise RuntimeError(f"the job ended {state} before the failure fired; give the sources more records.")
        if o["savepoint"] and not CASE.get("savepoint"):
            raise RuntimeError(f"the job ended {state} before a savepoint was taken ({CASE.get('savepoint_failure')}).")
        restore = CASE.get("savepoint") or (latest_retained(work, job) if state == "FAILED" and not in_place else None)
        if state == "FAILED" and restore is None:
            raise RuntimeError(f"job {job} failed: {exceptions(port, job)}")
        if restore is not None:
            try:
                job = submit(port, target, work, False, restore)
            except Exception as exc:  # refused at submission: the deepest Java cause is Flink's reason
                causes = [x.strip() for x in str(exc).splitlines() if x.strip().startswith("Caused by:")]
                return (causes[-1] if causes else str(exc).splitlines()[0])[:500]
            print(f"job {job} restoring {restore} at {target}")
            if watch(port, job, False) != "FINISHED":
                return exceptions(port, job)
        return None
    finally:
        mini.close()

def exceptions(port: int, job: str) -> str:
    history = rest(port, f"/jobs/{job}/exceptions").get("exceptionHistory", {}).get("entries", [])
    return "; ".join(f"{e.get('exceptionName')}: {str(e.get('stacktrace', '')).splitlines()[0][:300]}" for e in history[-1:])

def check(work: str) -> list[str]:
    """What the committed output gets wrong: lost, duplicated or invented records; broken per-key counts."""
    seen: dict[int, int] = {}
    counts: dict[tuple[str, int], list[int]] = {}
    for sink in sorted(CASE["sinks"]):
        d = os.path.join(work, "sink", sink)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.startswith((".", "_")) or ".inprogress" in name:
                continue  # fs.FileSink's in-progress and pending files are hidden: not committed
            with open(os.path.join(d, name)) as fh:
                rows = [[int(x) for x in line.split(",")[:4]] for line in fh if line.strip()]
            for rid, key, _value, count in rows:
                seen[rid] = seen.get(rid, 0) + 1
                if sink in CASE["count_sinks"]:
                    counts.setdefault((sink, key), []).append(count)
    problems, total = [], 0
    for src, e in CASE["expect"].items():
        lay, table = CASE["layouts"][src], e["copies"]
        for j in range(lay["records"]):
            rid, want = lay["rid_base"] + j, table[j % len(table)]
            total += want
            got = seen.pop(rid, 0)
            if got != want:
                problems.append(f"record {rid} (source {src}): committed {got} times, expected {want}")
    problems += [f"record {rid}: committed {n} times but no source made it" for rid, n in sorted(seen.items())]
    for (sink, key), cs in sorted(counts.items()):
        if sorted(cs) != list(range(1, len(cs) + 1)):
            problems.append(f"sink {sink}, key {key}: counts {sorted(cs)[:12]} are not 1..{len(cs)}")
    print(f"committed output checked: {total} record copies expected")
    return problems

def main() -> int:
    keep = "--keep" in sys.argv
    work = sys.argv[sys.argv.index("--work") + 1] if "--work" in sys.argv else tempfile.mkdtemp(prefix="flink-case-")
    work = CASE["work"] = os.path.abspath(work)
    os.makedirs(os.path.join(work, "control"), exist_ok=True)
    CASE["probe"].update(armed=os.path.join(work, "control", "armed"), fired=os.path.join(work, "control", "fired"))
    print(f"case {CASE['graph'].get('name')}: {CASE['summary']}; work directory {work}")
    try:
        refused = None if "--check-only" in sys.argv else run(work)  # --check-only: judge a kept --work directory again
    except Exception as exc:  # the run could not be carried out: not a verdict
        print(f"ERROR: {str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__}")
        return 2
    expected = CASE["expected_refusal"]
    if refused is not None or expected:
        ok = bool(refused) == bool(expected)
        print(("PASS" if ok else "FAIL") + f": the restore was {'refused' if refused else 'accepted'} by Flink, the model "
              f"{'refuses it (' + expected + ')' if expected else 'accepts it'}" + (f"; Flink said: {refused}" if refused else ""))
        return 0 if ok else 1
    problems = check(work)
    if not keep and not problems:  # a FAIL keeps its evidence
        shutil.rmtree(work, ignore_errors=True)
    if problems:
        print(f"FAIL: {len(problems)} disagreements with exactly-once; first ones:")
        print("\n".join("  " + p for p in problems[:20]))
        return 1
    print("PASS: every record committed as often as the graph says, every key's counts are 1..n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
