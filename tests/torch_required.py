"""In CI a missing torch is a failure, not a skip: with KERNELSCOPE_REQUIRE_TORCH=1 (.ci/run sets it), a test or a
test module skipped because ``pytest.importorskip("torch")`` could not import torch fails instead. Elsewhere (a
machine with the analyzer only) those tests are skipped as before. conftest.py takes these hooks."""

from __future__ import annotations

import os

import pytest

REQUIRED = "KERNELSCOPE_REQUIRE_TORCH"


def _fail_if_torch_is_missing(report) -> None:
    if os.environ.get(REQUIRED) == "1" and report.skipped and "could not import 'torch'" in str(report.longrepr):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"torch is required here ({REQUIRED}=1), and {reason}"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    _fail_if_torch_is_missing(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _fail_if_torch_is_missing(report)
    return report
