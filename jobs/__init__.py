"""Thin ``spark-submit`` entry points; the logic lives in ``pipeline``."""
