"""The command groups of ``cutcheck.cli``: one module per group; each registers its commands on ``common.app`` when imported."""
