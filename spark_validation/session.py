"""Building the SparkSession that validation and log synthesis run in.

One session per process: Spark allows a single SparkContext per JVM, so :func:`get_session`
reuses a running session (the test suite shares one) and only builds a new one when none runs.

Java is checked before PySpark tries to launch it, because PySpark's own failure is a long
traceback about a gateway; the user gets one sentence instead (:class:`EnvironmentProblem`).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cutcheck.model.errors import EnvironmentProblem

if TYPE_CHECKING:  # pyspark is imported lazily: finding Java must not need it
    from pyspark.sql import SparkSession


def java_problem(problem: str) -> EnvironmentProblem:
    """One sentence: what is wrong with Java and how to get a usable one."""
    return EnvironmentProblem(
        f"Spark needs Java 17 or newer, but {problem}; install it (for example `apt-get install "
        "openjdk-17-jre-headless`) and put `java` on PATH or set JAVA_HOME."
    )


# Spark prints INFO/WARN/ERROR chatter (and, in a PySpark "shell", a banner about the default log
# level) to the terminal. An explicit log4j2 configuration at FATAL silences both; the loggers named
# below are the ones Spark consults to decide the shell's level.
_LOG4J2 = """\
rootLogger.level = fatal
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.submit.name = org.apache.spark.deploy.SparkSubmit
logger.submit.level = fatal
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = fatal
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = fatal
"""

DEFAULT_MASTER = "local[*]"
# Aim for shuffle partitions of about this much input; AQE coalesces small ones after the fact.
TARGET_PARTITION_BYTES = 48 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class JavaInfo:
    path: str
    major: int


def find_java() -> JavaInfo:
    """Locate the java that PySpark will launch (JAVA_HOME first, then PATH) and check it runs."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        # Spark's launcher uses JAVA_HOME unconditionally when it is set, so a broken one is fatal
        # even with a good java on PATH.
        p = Path(java_home) / "bin" / "java"
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise java_problem(f"JAVA_HOME={java_home} has no bin/java")
        candidate: str | None = str(p)
    else:
        candidate = shutil.which("java")
    if candidate is None:
        raise java_problem("no `java` is on PATH and JAVA_HOME is not set")
    try:
        proc = subprocess.run([candidate, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise java_problem(f"{candidate} cannot be run ({exc})") from None
    text = proc.stderr + proc.stdout
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if proc.returncode != 0 or m is None:
        raise java_problem(f"`{candidate} -version` fails")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0" style
        major = int(m.group(2))
    if major < 17:
        raise java_problem(f"{candidate} is Java {major}")
    return JavaInfo(candidate, major)


def _log4j2_file() -> Path:
    digest = hashlib.sha256(_LOG4J2.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"cutcheck-log4j2-{digest}.properties"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J2)
        os.replace(tmp, path)
    return path


def default_driver_memory() -> str:
    """40% of physical memory, between 1 and 8 GiB: enough to keep the aggregations in memory."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "2g"
    gib = max(1, min(8, int(total * 0.4 / 2**30)))
    return f"{gib}g"


def shuffle_partitions(data_bytes: int, cores: int) -> int:
    """Shuffle partitions sized from the data: about TARGET_PARTITION_BYTES of input each.

    Never fewer than the cores (so every core works), never more than 4000 (task overhead).
    A multiple of the core count keeps the last wave of tasks full.
    """
    cores = max(1, cores)
    wanted = max(cores, math.ceil(data_bytes / TARGET_PARTITION_BYTES))
    return min(4000, math.ceil(wanted / cores) * cores)


def active_session() -> SparkSession | None:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        spark = SparkSession._instantiatedSession  # the default session of this process, if any
    if spark is None or spark.sparkContext._jsc is None:  # stopped
        return None
    return spark


def build_session(
    master: str | None = None,
    driver_memory: str | None = None,
    app_name: str = "cutcheck",
    shuffle_partitions: int | None = None,
) -> SparkSession:
    """A new SparkSession: local[*] by default, AQE on, UI off, Spark logs silenced.

    ``driver_memory`` only takes effect when this call starts the JVM (Spark fixes it at launch).
    """
    find_java()
    quiet_python_loggers()
    from pyspark.sql import SparkSession

    # Python workers (seed campaigns run the engine as Spark tasks) use this interpreter unless the
    # user chose one: the context fixes it at start, and a later caller reuses this session.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    mem = driver_memory or default_driver_memory()
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or DEFAULT_MASTER)
        .config("spark.driver.memory", mem)
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_log4j2_file()}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.adaptive.coalescePartitions.enabled", "true")
        .config("spark.sql.adaptive.advisoryPartitionSizeInBytes", str(TARGET_PARTITION_BYTES))
        # Validation reads each input column once per check family; a wide scan split keeps the
        # number of scan tasks (and per-task overhead) low on small machines.
        .config("spark.sql.files.maxPartitionBytes", str(128 * 1024 * 1024))
    )
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if (master or DEFAULT_MASTER).startswith("local"):
        # Local mode: the driver is the only executor; bind to loopback so a machine whose
        # hostname does not resolve still starts.
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    try:
        quiet_launch(dict(builder._options))
        spark = builder.getOrCreate()
    except Exception as exc:  # PySpark raises its own runtime errors when the JVM cannot start
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise java_problem(f"Spark could not start with it ({first})") from None
    # Task failures (unreadable files, for instance) reach the caller as exceptions that become
    # one sentence; Spark's own ERROR lines would repeat them as JVM stack traces.
    spark.sparkContext.setLogLevel("FATAL")
    install_interrupt_handler()
    return spark


def jvm_log() -> Path:
    """Where the JVM's own stdout and stderr go (one file per process, removed at exit unless kept)."""
    return Path(tempfile.gettempdir()) / f"cutcheck-spark-{os.getpid()}.log"


_KEEP_LOG = False


def keep_jvm_log() -> Path:
    """Keep the JVM's log after exit (an error message names it) and return its path."""
    global _KEEP_LOG
    _KEEP_LOG = True
    return jvm_log()


def _remove_log() -> None:
    if not _KEEP_LOG:
        with contextlib.suppress(OSError):
            jvm_log().unlink()


def quiet_launch(options: dict[str, str]) -> None:
    """Start Spark's JVM with its stdout and stderr in :func:`jvm_log`, not the user's terminal.

    The JVM prints some lines itself before any logger is configured (``WARNING: Using incubator
    modules``), so a log4j level alone cannot silence it. A JVM that already runs (or one given by
    PYSPARK_GATEWAY_PORT) is left as it is.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False)
    for k, v in options.items():
        conf.set(k, str(v))
    log = open(jvm_log(), "ab")  # noqa: SIM115 - the JVM holds it for the life of the process
    atexit.register(_remove_log)
    with SparkContext._lock:
        if SparkContext._gateway is None:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
            SparkContext._gateway = gateway
            SparkContext._jvm = gateway.jvm
    log.close()  # the child has its own descriptor


# Set by the SIGINT handler: exceptions raised after it are consequences of the interruption.
INTERRUPTED = threading.Event()


def _on_sigint(signum: int, frame: Any) -> None:
    INTERRUPTED.set()
    raise KeyboardInterrupt


def install_interrupt_handler() -> None:
    """Replace PySpark's SIGINT handler (which calls the JVM from inside the interrupted call and
    prints Py4J tracebacks) by one that only raises KeyboardInterrupt; callers stop the JVM."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_sigint)


def jvm_started() -> bool:
    """True when this process already talks to a Spark JVM."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def stop_jvm(timeout: float = 15.0) -> None:
    """Terminate this process's Spark JVM and wait for it: its shutdown hooks remove Spark's
    temporary directories and no task keeps writing into a directory the caller removes next."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(OSError):
        proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def quiet_python_loggers() -> None:
    """PySpark logs every SQL error with its query context as JSON before raising it; the errors
    still reach us (and become one sentence), so the duplicate JSON on stderr is only noise."""
    for name in ("DataFrameQueryContextLogger", "SQLQueryContextLogger", "py4j"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    # py4j logs an interrupted or lost connection (Ctrl-C, a JVM that died) with a traceback through
    # the *root* logger (``logging.exception``) before it raises; the exception itself reaches us.
    root = logging.getLogger()
    if not any(isinstance(f, _Py4JRecords) for f in root.filters):
        root.addFilter(_Py4JRecords())


class _Py4JRecords(logging.Filter):
    """Drops records that py4j's own modules log through the root logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


def get_session(
    master: str | None = None, driver_memory: str | None = None, app_name: str = "cutcheck"
) -> SparkSession:
    """The running session when there is one (and it matches ``master``), else a new one."""
    quiet_python_loggers()
    spark = active_session()
    if spark is None:
        return build_session(master=master, driver_memory=driver_memory, app_name=app_name)
    running = spark.sparkContext.master
    if master is not None and master != running:
        raise EnvironmentProblem(
            f"a Spark session with master {running} already runs in this process and Spark allows one; "
            f"stop it or run with --master {running}."
        )
    return spark


def cores(spark: SparkSession) -> int:
    return max(1, int(spark.sparkContext.defaultParallelism))


# Validation aggregates by nearly unique keys (rid; (key, counter, count)). Measured on 10M records
# and 2 cores, sort-based aggregation needs about 30% less CPU than hashing there (the hash maps
# outgrow the caches and spill), and the little it costs the small (txn) aggregation is far less.
#
# Adaptive execution may replace a branch whose shuffle stage came out empty by an empty relation,
# and the row counts observed in that stage (what each check examined) would go with it.
VALIDATION_CONF: dict[str, str] = {
    "spark.sql.execution.useHashAggregateExec": "false",
    "spark.sql.adaptive.optimizer.excludedRules":
        "org.apache.spark.sql.execution.adaptive.AQEPropagateEmptyRelation",
}


@contextmanager
def sql_conf(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """Set runtime SQL settings for the duration of a block, then restore them (the session is shared)."""
    before = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
