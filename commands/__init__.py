"""The command groups of ``cli``: one module per group; each registers its commands on ``cli.app``."""
