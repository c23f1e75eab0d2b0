"""Handlers of the dashboard MCP server, with in-memory data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dashboard_server.inputs import (
        MetricGetInput,
        MetricListInput,
    )


METRICS = {
    "latency": {
        "name": "latency",
        "value": 12.345,
        "unit": "ms",
        "series": [10, 12.5, 15],
        "owner_email": "ops@example.com",
        "meta": {"source": "probe", "sampled": True},
    },
    "errors": {"name": "errors", "value": 0, "series": [], "owner_email": ""},
}


def metric_get(args: MetricGetInput) -> Any:
    """metric.get: One metric."""
    return METRICS[args.name]


def metric_list(args: MetricListInput) -> Any:
    """metric.list: Every metric."""
    return list(METRICS.values())
