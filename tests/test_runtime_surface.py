"""fusiongen/runtime/_surface.py and _catalog.py as source: exposure, URI templates, prompt rendering, resource
envelopes."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from fusiongen.runtime._catalog import PromptRoute, ResourceRoute, render_prompt, resource_result
from fusiongen.runtime._presenting import Notes, presented_result
from fusiongen.runtime._results import tool_error
from fusiongen.runtime._surface import (
    exposed_tools,
    tag_list,
)

KINDS = {"get": "query", "put": "mutation", "bound.q": "query", "bound.m": "mutation"}
TAGS = {"get": frozenset({"a"}), "bound.m": frozenset({"b"})}
WORKFLOW = {"w.start": ("bound.q", "bound.m"), "w.status": ("bound.q", "bound.m")}


@pytest.mark.parametrize(
    ("expose", "tags", "served"),
    [
        ("all", None, {"get", "put", "bound.q", "bound.m", "w.start", "w.status"}),
        ("read-only", None, {"get", "bound.q", "w.start", "w.status"}),
        ("all", ["a"], {"get"}),  # no bound tool tagged a: the workflow's tools go with them
        ("all", ["b"], {"bound.m", "w.start", "w.status"}),
        ("read-only", ["b"], set()),
        ("all", [], set()),
    ],
)
def test_exposed_tools(expose: str, tags: list[str] | None, served: set[str]) -> None:
    assert exposed_tools(KINDS, TAGS, WORKFLOW, expose, tags) == served


def test_without_a_filter_a_workflow_without_bound_tools_is_served() -> None:
    lone = {"w.start": (), "w.status": ()}
    assert exposed_tools({}, {}, lone) == {"w.start", "w.status"}
    assert exposed_tools({}, {}, lone, "read-only") == set()


def test_an_unknown_exposure_is_refused() -> None:
    with pytest.raises(ValueError, match="all, read-only"):
        exposed_tools(KINDS, TAGS, WORKFLOW, "writes")


def test_tag_list() -> None:
    assert tag_list(" a, b,,c ") == ["a", "b", "c"] and tag_list("") == []


async def _never(variables: Any, ctx: Any) -> types.CallToolResult:
    raise AssertionError


def test_a_template_matches_one_segment_per_variable_percent_decoded() -> None:
    route = ResourceRoute("item", "item://{sku}/v{version}", None, _never, frozenset({"version"}))
    assert route.match("item://a%2Fb/v3") == {"sku": "a/b", "version": 3}
    assert route.match("item://a/b/v3") is None  # a variable never spans a /
    assert route.match("item://a/v3/extra") is None
    assert route.match("item://a/vthree") == {"sku": "a", "version": "three"}  # left for the check to refuse
    assert route.match("item://a/vtrue") == {"sku": "a", "version": True}
    assert route.match("item://a/v[1]") == {"sku": "a", "version": "[1]"}  # only numbers and booleans


def test_a_static_uri_matches_only_itself() -> None:
    route = ResourceRoute("c", "shop://catalog.v1", None, _never)
    assert route.match("shop://catalog.v1") == {}
    assert route.match("shop://catalogXv1") is None  # `.` is literal


PROMPT = PromptRoute(
    types.Prompt(
        name="p",
        arguments=[types.PromptArgument(name="who", required=True), types.PromptArgument(name="tone", required=False)],
    ),
    (("Hello ", False), ("who", True), (", ", False), ("tone", True)),
    {"tone": ("kind", "firm")},
)


def test_prompt_arguments_are_substituted_as_text() -> None:
    assert render_prompt(PROMPT, {"who": "{tone} %s {0}", "tone": "firm"}) == "Hello {tone} %s {0}, firm"
    assert render_prompt(PROMPT, {"who": "x"}) == "Hello x, "


def test_bad_prompt_arguments_are_refused_together() -> None:
    with pytest.raises(MCPError) as refused:
        render_prompt(PROMPT, {"tone": "rude", "x": "1"})
    assert refused.value.error.message == (
        'Prompt "p": unknown argument "x"; missing required argument "who"; argument "tone" must be one of kind, firm.'
    )


def test_a_resource_body_is_the_presenter_envelope_unescaped() -> None:
    notes = Notes()
    notes.rules.append("a < b & c")
    notes.suggestions.append(("t.x", "do <it>"))
    read = resource_result("r", "r://1", presented_result({"n": 1}, notes))
    body = read.contents[0]
    assert isinstance(body, types.TextResourceContents) and body.mime_type == "application/json"
    assert json.loads(body.text) == {
        "data": {"n": 1},
        "rules": ["a < b & c"],
        "suggestions": [{"tool": "t.x", "reason": "do <it>"}],
    }


def test_an_error_result_is_a_protocol_error_with_the_uri() -> None:
    with pytest.raises(MCPError) as failed:
        resource_result("r", "r://1", tool_error("r", "INTERNAL_ERROR", "failed", "retry"))
    assert failed.value.error.code == -32603 and failed.value.error.data == {"uri": "r://1"}
