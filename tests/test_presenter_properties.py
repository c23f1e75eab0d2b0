"""Property: whatever a handler returns, nothing redacted, hidden, narrowed out or undeclared reaches
the model, and every result fits the tool's outputSchema.

One spec with nested models, lists of models, a list of strings, `a.*.b`, `[*]` and nested `[*]` paths
and an embedded presenter (in a model field and in a list field, with the parent redacting paths inside
it too) is built once per module. Hypothesis generates payloads with a marked PII string (`PII-…`) at
every redacted path, every hidden field, the field the presenter narrows out and random undeclared
keys; optional values are missing, null or set; lists are lists or tuples; every object is a dict, a
dict subclass, a non-dict Mapping, a pydantic model, a dataclass or a plain object. The generated
presenter functions are called directly (fast); a smaller check drives the same payloads through a
real `mcp.Client` in both protocol eras.

Safe values never contain "PII", so it can only come from a marker.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
from collections.abc import Iterator
from typing import Any

import anyio
import jsonschema
import pydantic
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mcp import Client

from tests.support.build import GeneratedServer, build
from tests.support.containers import Plain, ReadOnly, Registry

MARK = "PII"
LIMIT = 3

SPEC = """
[server]
name = "pp-props"
package = "pp_props_server"
handlers = "pp_props_handlers"

[models.Address]
[models.Address.fields]
street = "string"
city = "string"
zip = { type = "string", required = false, nullable = true }

[models.Places]
[models.Places.fields]
home = { type = "Address", required = false, nullable = true }
work = { type = "Address", required = false }
label = { type = "string", required = false }

[models.Payment]
casts = { amount = "integer" }
[models.Payment.fields]
card = { type = "string", required = false, nullable = true }
amount = "integer"
memo = { type = "string", required = false }

[models.Line]
[models.Line.fields]
sku = "string"
payments = { type = "list", items = "Payment" }
codes = { type = "list", items = "string", required = false }

[models.Person]
hidden = ["ssn"]
[models.Person.fields]
id = "string"
name = { type = "string", description = "Full name" }
email = { type = "string", required = false, nullable = true }
phone = { type = "string", required = false }
ssn = { type = "string", required = false }

[models.Account]
description = "An account."
hidden = ["password", "pin"]
[models.Account.fields]
id = "string"
tier = { type = "enum", values = ["basic", "gold"] }
places = { type = "Places", required = false, nullable = true }
lines = { type = "list", items = "Line" }
owner = { type = "Person", required = false, nullable = true }
members = { type = "list", items = "Person", required = false }
secret = { type = "string", required = false }
nickname = { type = "string", required = false, nullable = true }
internal = { type = "string", required = false }
password = { type = "string", required = false }
pin = { type = "integer", required = false }

[presenters.PersonCard]
model = "Person"
redact_pii = ["email", "phone"]
censor = "<p>"
rules = ["Person {id}."]

[[presenters.PersonCard.ui]]
type = "summary"
text = "Person {id}"

[[presenters.PersonCard.ui]]
type = "list"
audience = "user"
items = ["{email}", "{phone}"]

[presenters.AccountView]
model = "Account"
fields = ["id", "tier", "places", "lines", "owner", "members", "secret", "nickname"]
embed = { owner = "PersonCard", members = "PersonCard" }
redact_pii = ["places.*.street", "places.*.zip", "lines[*].payments[*].card", "lines[*].payments[*].memo",
              "lines[*].codes[*]", "secret", "nickname", "owner.name", "owner.email", "members[*].name"]
censor = "###"
limit = 3
rules = ["Account {id} is {tier}."]
rules_when = [{ when = "tier == 'gold'", rule = "Gold account {id} ({places.label})." }]
suggest = [{ tool = "account.get", reason = "Reload {id} of {owner.id}", when = "tier == 'basic'" }]

[[presenters.AccountView.ui]]
type = "table"
columns = ["Field", "Value"]
rows = [["Id", "{id}"], ["Tier", "{upper(tier)}"], ["Label", "{places.label}"]]

[[presenters.AccountView.ui]]
type = "json"
path = "tier"

[[presenters.AccountView.ui]]
type = "markdown"
audience = "user"
text = "{secret} {nickname} {places} {lines}"

[[presenters.AccountView.ui]]
type = "json"
audience = "user"

[[presenters.AccountView.collection_ui]]
type = "table"
columns = ["Id", "Tier"]
row = ["{id}", "{tier}"]

[[presenters.AccountView.collection_ui]]
type = "markdown"
text = "{count()} accounts"

[[presenters.AccountView.collection_ui]]
type = "json"
audience = "user"

[tools."account.get"]
kind = "query"
returns = "AccountView"
handler = "get_account"

[tools."account.list"]
kind = "query"
returns = "AccountView[]"
handler = "list_accounts"
"""

HANDLERS = '''"""Handlers of the property-test server: each returns whatever the test put in PAYLOAD."""

PAYLOAD = None


def get_account(args):
    return PAYLOAD


def list_accounts(args):
    return PAYLOAD
'''


@dataclasses.dataclass
class Built:
    server: GeneratedServer
    presenters: types.ModuleType
    single: jsonschema.protocols.Validator
    many: jsonschema.protocols.Validator


def validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    directory = tmp_path_factory.mktemp("props")
    (directory / "pp_props.toml").write_text(SPEC, encoding="utf-8")
    (directory / "pp_props_handlers.py").write_text(HANDLERS, encoding="utf-8")
    out = directory / "out"
    with GeneratedServer(build(directory / "pp_props.toml", out), out) as server:
        advertised = {tool.name: tool.output_schema for tool in server.module("server").TOOLS}
        yield Built(
            server,
            server.module("presenters"),
            validator(advertised["account_get"]),
            validator(advertised["account_list"]),
        )


# --- payloads ------------------------------------------------------------------------------------------

# Small pools keep generation cheap: the structure, not the text, is what varies.
safe = st.sampled_from(["", "a", "bo", "x y", "long-ish name", "-"])
pii = st.integers(0, 99).map(lambda n: f"{MARK}-{n}")
EXTRA_KEYS = ("note", "legacy_id", "debug", "owner_ssn")
ABSENT = object()  # a field left out of the payload


def optional(value: st.SearchStrategy[Any], *, nullable: bool = True) -> st.SearchStrategy[Any]:
    """A missing, null or present value (null is also accepted for optional non-nullable fields)."""
    return st.one_of(st.just(ABSENT), st.none(), value) if nullable else st.one_of(st.just(ABSENT), value)


def obj(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """A payload object: the fields (absent ones dropped) plus undeclared keys carrying PII."""
    extras = st.dictionaries(st.sampled_from(EXTRA_KEYS), pii, max_size=2)
    return st.tuples(st.fixed_dictionaries(fields), extras).map(
        lambda pair: {**{k: v for k, v in pair[0].items() if v is not ABSENT}, **pair[1]}
    )


address = obj({"street": pii, "city": safe, "zip": optional(pii)})
places = obj({"home": optional(address), "work": optional(address), "label": optional(safe)})
payment = obj(
    {
        "card": optional(pii),
        "amount": st.one_of(st.integers(-(10**6), 10**6), st.integers(0, 9999).map(str)),
        "memo": optional(pii),
    }
)
line = obj({"sku": safe, "payments": st.lists(payment, max_size=2), "codes": optional(st.lists(pii, max_size=2))})
person = obj({"id": safe, "name": pii, "email": optional(pii), "phone": optional(pii), "ssn": optional(pii)})
account = obj(
    {
        "id": safe,
        "tier": st.sampled_from(["basic", "gold"]),
        "places": optional(places),
        "lines": st.lists(line, max_size=2),
        "owner": optional(person),
        "members": optional(st.lists(person, max_size=2)),
        "secret": optional(pii),
        "nickname": optional(pii),
        "internal": optional(pii),
        "password": optional(pii),
        "pin": optional(st.integers(0, 9999)),
    }
)


# How the handler hands the data over: the same values, in every kind of container.


@functools.cache
def dataclass_for(keys: tuple[str, ...]) -> type:
    return dataclasses.make_dataclass("Row", [(k, Any) for k in keys])


@functools.cache
def pydantic_for(keys: tuple[str, ...]) -> type[pydantic.BaseModel]:
    return pydantic.create_model("Row", **{k: (Any, ...) for k in keys})  # type: ignore[call-overload, no-any-return]


KINDS = ("dict", "dict-subclass", "mapping", "object", "dataclass", "pydantic")


def wrap(value: Any, draw: st.DrawFn) -> Any:
    if isinstance(value, list):
        return draw(st.sampled_from((list, tuple)))(wrap(v, draw) for v in value)
    if not isinstance(value, dict):
        return value
    inner = {k: wrap(v, draw) for k, v in value.items()}
    kind = draw(st.sampled_from(KINDS))
    if kind == "dict":
        return inner
    if kind == "dict-subclass":
        return Registry(inner)
    if kind == "mapping":
        return ReadOnly(inner)
    if kind == "object":
        return Plain(inner)
    if kind == "dataclass":
        return dataclass_for(tuple(inner))(**inner)
    return pydantic_for(tuple(inner))(**inner)


@st.composite
def handed_over(draw: st.DrawFn) -> tuple[list[dict[str, Any]], Any]:
    """Accounts as plain dicts, and the same accounts as the handler returns them (list or tuple)."""
    accounts = draw(st.lists(account, min_size=1, max_size=LIMIT + 2))
    return accounts, wrap(accounts, draw)


# --- checks --------------------------------------------------------------------------------------------


# Every presenter's user-only blocks sent (the default omits them): they must be annotated for the user.
SENT = frozenset({"PersonCard", "AccountView"})


def for_user(block: Any) -> bool:
    return bool(block.annotations and block.annotations.audience == ["user"])


def model_view(result: Any) -> str:
    """Every content block not annotated for the user, and the structured content."""
    shown = [b.text for b in result.content if not for_user(b)]
    return json.dumps(shown) + json.dumps(result.structured_content)


def check_result(result: Any, check: jsonschema.protocols.Validator) -> None:
    assert not result.is_error
    seen = model_view(result)
    assert MARK not in seen, seen
    check.validate(result.structured_content)
    for block in result.content:
        assert block.annotations is None or block.annotations.audience == ["user"]


def check_single(result: Any, check: jsonschema.protocols.Validator) -> None:
    check_result(result, check)
    assert json.JSONDecoder().raw_decode(result.content[0].text)[0] == result.structured_content["data"]


def check_many(result: Any, check: jsonschema.protocols.Validator, found: int) -> None:
    check_result(result, check)
    data = result.structured_content
    assert (data["total"], data["shown"], data["truncated"]) == (found, min(found, LIMIT), found > LIMIT)
    assert len(data["data"]) == data["shown"]
    assert json.JSONDecoder().raw_decode(result.content[0].text)[0] == data["data"]
    assert ("notice" in data) is data["truncated"]


def same(a: Any, b: Any) -> None:
    assert [(x.text, x.annotations) for x in a.content] == [(y.text, y.annotations) for y in b.content]
    assert a.structured_content == b.structured_content


# No "explain" phase: on a failure it replays hundreds of variations, minutes for little insight here.
PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink)


@settings(max_examples=2000, deadline=None, phases=PHASES, suppress_health_check=[HealthCheck.too_slow])
@given(payload=handed_over())
def test_nothing_marked_reaches_the_model_and_results_fit_the_schema(
    built: Built, payload: tuple[list[dict[str, Any]], Any]
) -> None:
    accounts, handed = payload
    single = built.presenters.present_account_view(handed[0], user=SENT)
    check_single(single, built.single)
    many = built.presenters.present_account_view_many(handed, user=SENT)
    check_many(many, built.many, len(accounts))
    # Containers do not matter: the plain dicts give exactly the same result.
    same(single, built.presenters.present_account_view(accounts[0], user=SENT))
    same(many, built.presenters.present_account_view_many(accounts, user=SENT))


async def through_client(built: Built, tool: str, payload: Any) -> tuple[list[Any], dict[str, Any]]:
    """The result of `tool` in both protocol eras, and the outputSchema it advertises."""
    built.server.handlers.PAYLOAD = payload
    results: list[Any] = []
    schema: dict[str, Any] = {}
    for mode in ("legacy", "2026-07-28"):
        async with Client(built.server.create_server(user_blocks="send"), mode=mode, cache=None) as client:
            schema = {t.name: t for t in (await client.list_tools()).tools}[tool].output_schema
            results.append(await client.call_tool(tool, {}))
    return results, schema


@settings(max_examples=25, deadline=None, phases=PHASES, suppress_health_check=[HealthCheck.too_slow])
@given(payload=handed_over())
def test_the_same_holds_through_a_real_client(built: Built, payload: tuple[list[dict[str, Any]], Any]) -> None:
    accounts, handed = payload
    (legacy, modern), schema = anyio.run(through_client, built, "account_get", handed[0])
    assert schema == built.single.schema  # what is advertised is what the property checks against
    for result in (legacy, modern):
        check_single(result, built.single)
    same(legacy, modern)
    (legacy, modern), schema = anyio.run(through_client, built, "account_list", handed)
    assert schema == built.many.schema
    for result in (legacy, modern):
        check_many(result, built.many, len(accounts))
    same(legacy, modern)
    same(legacy, built.presenters.present_account_view_many(accounts, user=SENT))


def test_the_spec_uses_every_path_form(built: Built) -> None:
    ir = next(p for p in built.server.generation.ir.presenters if p.name == "AccountView")
    paths = set(ir.redactions)
    assert ("places", "home", "street") in paths and ("places", "work", "zip") in paths  # a.*.b
    assert ("lines", "[*]", "payments", "[*]", "card") in paths  # nested lists
    assert ("lines", "[*]", "codes", "[*]") in paths  # a list of strings
    assert ("secret",) in paths
    # Paths into the embedded presenter (whose own censor masks email): the parent's censor wins.
    assert {("owner", "name"), ("owner", "email"), ("members", "[*]", "name")} <= paths
    assert dict(ir.embeds) == {"owner": "PersonCard", "members": "PersonCard"}
