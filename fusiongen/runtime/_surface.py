"""Which tools a server exposes: `--expose` and `--tags`, chosen once at start-up (every server has them; the
resources, prompts and completion of a spec that has them are `_catalog.py`)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

# --- exposure -------------------------------------------------------------------------------------

EXPOSE_MODES: Final = ("all", "read-only")


def exposed_tools(
    kinds: Mapping[str, str],
    tags: Mapping[str, frozenset[str]],
    workflow_tools: Mapping[str, Sequence[str]],
    expose: str = "all",
    only_tags: Iterable[str] | None = None,
) -> frozenset[str]:
    """The names of the tools this server serves, chosen once at start-up (`--expose`, `--tags`).

    `kinds` and `tags` describe the spec's tools; `workflow_tools` maps each generated workflow tool
    (`W.start`, `W.status`, `W.resolve`) to the tools bound to its workflow. "read-only" keeps the
    `kind = "query"` tools; `only_tags` keeps the tools with at least one of those tags; both together
    keep what both keep. Under either filter, a workflow's generated tools are served while any of its bound
    tools is: without them, a workflow handle would open nothing.
    """
    if expose not in EXPOSE_MODES:
        raise ValueError(f"expose must be one of {', '.join(EXPOSE_MODES)}, not {expose!r}")
    wanted = frozenset(only_tags) if only_tags is not None else None
    served = {
        name
        for name, kind in kinds.items()
        if (expose == "all" or kind == "query") and (wanted is None or tags.get(name, frozenset()) & wanted)
    }
    if expose == "all" and wanted is None:  # nothing is filtered: every tool, a workflow's without bound tools too
        return frozenset(served | set(workflow_tools))
    served |= {name for name, bound in workflow_tools.items() if any(b in served for b in bound)}
    return frozenset(served)


def tag_list(text: str) -> list[str]:
    """`--tags billing,write` → ["billing", "write"] (blanks dropped)."""
    return [tag.strip() for tag in text.split(",") if tag.strip()]


def add_exposure_arguments(parser: argparse.ArgumentParser) -> None:
    """--expose and --tags: the served surface, chosen at start-up without a rebuild."""
    parser.add_argument(
        "--expose",
        choices=EXPOSE_MODES,
        default="all",
        help='which tools to serve: all (default) or read-only (only kind = "query" tools)',
    )
    parser.add_argument(
        "--tags",
        type=tag_list,
        default=None,
        metavar="TAG,...",
        help="serve only the tools with at least one of these tags (and the workflow tools of their workflows)",
    )
