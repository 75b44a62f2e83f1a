"""Hypothesis profiles: quick (local default), ci (CI=true), deep (long campaigns).

Select one with CUTCHECK_PROFILE=quick|ci|deep; CI=true picks ci.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large]}
settings.register_profile("quick", max_examples=25, derandomize=True, **_common)
settings.register_profile("ci", max_examples=60, derandomize=True, **_common)
settings.register_profile("deep", max_examples=1000, **_common)

_profile = os.environ.get("CUTCHECK_PROFILE") or ("ci" if os.environ.get("CI", "").lower() == "true" else "quick")
settings.load_profile(_profile)
