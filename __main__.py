"""``python -m cutcheck``: the same program as the ``cutcheck`` console script."""

from cutcheck.cli import main

main()
