"""Evaluator metrics under OSWorld's names; importing this package registers them all."""

from environments.tasks.metrics import docx, table, text
from environments.tasks.metrics.registry import METRICS, Metric, metric, unsupported_reason

__all__ = ["METRICS", "Metric", "docx", "metric", "table", "text", "unsupported_reason"]
