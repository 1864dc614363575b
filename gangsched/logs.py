"""structlog set-up: key/value events, JSON for machines or a console renderer for people.

Libraries (kopf, aiohttp, kubernetes_asyncio) log through the standard
library; their records are rendered by the same processors as ours, so a
process writes one format only. kopf's "Request attempt #1/9 failed; will
retry" is logged by kopf as an ERROR; it is the normal start-up race with an
API server still coming up (connection refused, 503 while it registers the
CRDs) and kopf retries it, so it is a warning here. Only a request kopf gives
up on ("escalating") stays an error.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog

RETRIED = "will retry"


class RetriedIsAWarning(logging.Filter):
    """Turn kopf's ERROR for a request it retries into a WARNING."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (record.levelno == logging.ERROR and record.name.startswith("kopf")
                and RETRIED in record.getMessage()):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _kopf_object(
    _: Any, __: str, event_dict: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """kopf attaches the object a line is about as ``k8s_ref``; keep it as ``object``."""
    record = event_dict.get("_record")
    ref = getattr(record, "k8s_ref", None)
    if isinstance(ref, dict) and ref.get("name"):
        namespace = ref.get("namespace")
        event_dict["object"] = f"{namespace}/{ref['name']}" if namespace else ref["name"]
    return event_dict


def configure(fmt: str, level: str) -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    timestamper = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            timestamper,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RetriedIsAWarning())
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            timestamper,
            _kopf_object,
        ],
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            renderer,
        ],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # Libraries' own lines: warnings and above, whatever our own level.
    root.setLevel(max(numeric, logging.WARNING))
    logging.getLogger("kopf").setLevel(max(numeric, logging.WARNING))
