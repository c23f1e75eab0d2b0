"""Resource templates with several variables match in linear time: a long URI cannot stall the server.

`pair://{a}-{b}` compiled to a regular expression backtracked: a 12,000-character URI without a `-` took 2.2 s
(quadratic) on the event loop. Here the real server (`python -m pairs_server` on stdio) gets URIs of 300,000
characters, which a quadratic match would take hours over, and must answer each (not found) and then still serve
a real read. The split rule is pinned too: a value runs to the first occurrence of the text after it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.support.build import build
from tests.support.client import MODERN, connect, stdio_params

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SPEC = """
[server]
name = "pairs"
version = "1.0.0"

[models.Pair.fields]
a = "string"
b = "string"

[resources.pair]
uri = "pair://{a}-{b}"
presenter = "Pair"

[resources.triple]
uri = "triple://{a}.{b}.x{c}"
presenter = "Pair"
"""

HANDLERS = """
from typing import Any


def read_pair(args: Any) -> Any:
    return {"a": args.a, "b": args.b}


def read_triple(args: Any) -> Any:
    return {"a": args.a, "b": args.b + "|" + args.c}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pairs") / "out"
    build(SPEC, out, handlers=HANDLERS)
    return out


async def test_long_uris_are_matched_in_linear_time(built: Path) -> None:
    long = 300_000
    attacks = [
        "pair://" + "a" * long,
        "pair://" + "a-" * (long // 2) + "/",  # the regular expression tried every "-" as the split: quadratic
        "pair://" + "-" * long + "?",
        "triple://" + "a." * (long // 2),
    ]
    async with connect(stdio_params(built, package="pairs_server"), MODERN) as client:
        for uri in attacks:
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            assert refused.value.code == -32602
        read = await client.read_resource("pair://x-y-z")
        triple = await client.read_resource("triple://p.q.r.xs")
    # A value runs to the first occurrence of the literal after it: a = "x", b = "y-z".
    assert json.loads(read.contents[0].text)["data"] == {"a": "x", "b": "y-z"}  # type: ignore[union-attr]
    assert json.loads(triple.contents[0].text)["data"] == {"a": "p", "b": "q.r|s"}  # type: ignore[union-attr]
