"""cutcheck: an executable, proved model of Flink-style checkpointing.

The repository's top-level folders are this package's rooms (setuptools ``package-dir`` maps them):
``cutcheck.model`` (pure rules), ``cutcheck.proofs`` (Z3), ``cutcheck.reference`` (the engine),
``cutcheck.spark_validation``, ``cutcheck.flink_bridge``, ``cutcheck.commands`` and ``cutcheck.cli``.
"""

__version__ = "0.1.0"
