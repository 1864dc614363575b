"""structlog set-up: key/value events, JSON for machines or a console renderer for people."""

from __future__ import annotations

import logging
import sys

import structlog


def configure(fmt: str, level: str) -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    # Libraries log through the standard library; keep them to warnings and above.
    logging.basicConfig(stream=sys.stderr, level=max(numeric, logging.WARNING),
                        format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kopf").setLevel(max(numeric, logging.WARNING))
