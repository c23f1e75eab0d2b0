"""The one Jinja configuration fusiongen renders with: strict (an unknown name is an error, never an
empty string), whitespace-controlled, no autoescaping (every value is encoded for its context by the
view that prepares it, not by the template)."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

import jinja2


@functools.cache
def environment(package: str) -> jinja2.Environment:
    """The environment over `<package>/templates/` (a fusiongen subpackage, installed or in a checkout)."""
    templates = Path(str(resources.files(package).joinpath("templates")))
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
