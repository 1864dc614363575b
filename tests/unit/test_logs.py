"""Library log lines come out in the scheduler's own format, and kopf's retries are warnings."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from gangsched import logs


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """configure() is process-wide: put the defaults back for the tests that follow."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    structlog.reset_defaults()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_kopf_lines_are_json_like_ours_and_a_retried_request_is_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure("json", "info")
    kopf = logging.getLogger("kopf._cogs.clients.api")
    kopf.error("Request attempt #1/9 failed; will retry: GET https://127.0.0.1:1/apis "
               "-> ClientConnectorError()")
    kopf.error("Request attempt #9/9 failed; escalating: GET https://127.0.0.1:1/apis")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(line["level"], line["logger"]) for line in lines] == [
        ("warning", "kopf._cogs.clients.api"), ("error", "kopf._cogs.clients.api"),
    ]
    assert lines[0]["event"].startswith("Request attempt #1/9 failed; will retry")
    assert "timestamp" in lines[0]
