"""Handlers of the plugins server."""

from __future__ import annotations

import importlib
from typing import Any


def describe_plugin(args: Any) -> str:
    module = importlib.import_module(f"plugins.{args.name}")
    return str(module.__doc__)
