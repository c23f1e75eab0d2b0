"""Every value a generated server emits validates against the outputSchema it advertises, formats included.

A built server is driven in-process by a real `mcp.Client`, its handlers returning each accepted and each
refused form of a `date`, `datetime` and `uuid` value (plain fields, list items, nested models, presenters,
casts). Every structured result is validated against the tool's advertised `outputSchema` by a validator
that checks formats (jsonschema's `FORMAT_CHECKER`, with `rfc3339-validator` for `date-time`); the first
tests prove that checker refuses what it must, so the others cannot pass vacuously.
"""

from __future__ import annotations

import datetime
import types
import uuid
import zoneinfo
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from mcp import Client

from tests.support.build import GeneratedServer, build

pytestmark = pytest.mark.anyio

CHECKER = jsonschema.Draft202012Validator.FORMAT_CHECKER
UID = "12345678-1234-5678-1234-567812345678"
UTC = datetime.UTC
PLUS_2 = datetime.timezone(datetime.timedelta(hours=2))

SPEC = """
[server]
name = "formats"
package = "formats_server"
handlers = "formats_handlers"

[models.Slot]
description = "A time slot."
[models.Slot.fields]
start = "datetime"

[models.Event]
description = "One value of every format."
[models.Event.fields]
id = "uuid"
day = "date"
at = "datetime"
ended = { type = "datetime", nullable = true, required = false }
times = { type = "list", items = "datetime" }
days = { type = "list", items = "date" }
ids = { type = "list", items = "uuid" }
slot = "Slot"

[models.Legacy]
description = "A legacy row: timestamps and date-times where dates are wanted."
casts = { on = "date", seen = "datetime", since = "datetime" }
[models.Legacy.fields]
on = "datetime"
seen = "integer"
since = "date"

[presenters.EventCard]
model = "Event"
[[presenters.EventCard.ui]]
type = "markdown"
text = "Event {id} at {at}"

[tools."event.get"]
kind = "query"
description = "One event."
returns = "Event"
handler = "get_event"

[tools."event.list"]
kind = "query"
description = "Every event."
returns = "Event[]"
handler = "list_events"

[tools."event.card"]
kind = "query"
description = "One event, presented."
returns = "EventCard"
handler = "event_card"

[tools."event.echo"]
kind = "query"
description = "The date-time it was sent, as a slot."
returns = "Slot"
handler = "echo_slot"
[tools."event.echo".input]
start = "datetime"

[tools."legacy.get"]
kind = "query"
description = "One legacy row."
returns = "Legacy"
handler = "get_legacy"
"""


def event(**changes: Any) -> dict[str, Any]:
    """An event every field of which is valid; `changes` replace fields."""
    base: dict[str, Any] = {
        "id": uuid.UUID(UID),
        "day": datetime.date(2026, 11, 29),
        "at": datetime.datetime(2026, 11, 29, 17, 30, tzinfo=UTC),
        "ended": None,
        "times": [],
        "days": [],
        "ids": [],
        "slot": {"start": datetime.datetime(2026, 11, 29, 17, 30, tzinfo=UTC)},
    }
    return base | changes


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedServer]:
    directory = tmp_path_factory.mktemp("formats")
    spec = directory / "formats.toml"
    spec.write_text(SPEC, encoding="utf-8")
    (directory / "formats_handlers.py").write_text('"""Replaced by each test."""\n', encoding="utf-8")
    with GeneratedServer(build(spec, directory / "out"), directory / "out") as built:
        yield built


def handlers(server: GeneratedServer, payload: object) -> types.ModuleType:
    """A handler module whose every handler returns `payload`, except `echo_slot`, which echoes its input."""
    module = types.ModuleType("formats_test_handlers")
    for tool in server.generation.ir.handled:
        setattr(module, tool.handler, lambda args: payload)
    module.echo_slot = lambda args: {"start": args.start}  # type: ignore[attr-defined]
    return module


async def call(server: GeneratedServer, tool: str, payload: object, arguments: dict[str, Any] | None = None) -> Any:
    """Call `tool`, its handler returning `payload`; a success must validate, formats checked."""
    async with Client(server.create_server(handlers(server, payload)), mode="legacy", cache=None) as client:
        schemas = {t.name: t.output_schema for t in (await client.list_tools()).tools}
        result = await client.call_tool(tool, arguments or {})
    if not result.is_error:
        jsonschema.validate(result.structured_content, schemas[tool], format_checker=CHECKER)
    return result


async def emitted(server: GeneratedServer, tool: str, payload: object, arguments: dict[str, Any] | None = None) -> Any:
    result = await call(server, tool, payload, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content["data"]


async def refused_at(server: GeneratedServer, tool: str, payload: object) -> str:
    """The OUTPUT_INVALID text of a call whose handler returned `payload`."""
    result = await call(server, tool, payload)
    assert result.is_error and result.structured_content is None
    text = result.content[0].text
    assert 'code="OUTPUT_INVALID"' in text, text
    return text


# --- the checker is real ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "form"),
    [
        ("2026-11-29T17:30", "date-time"),  # no seconds, no offset: what was sent before
        ("2026-11-29T17:30:00", "date-time"),  # no offset
        ("2026-11-29T17:30:00+05:30:15", "date-time"),  # an offset with seconds
        ("2026-02-30", "date"),
        ("20261129", "date"),
        ("not-a-uuid", "uuid"),
        ("12345678123456781234567812345678", "uuid"),
    ],
)
def test_the_format_checker_refuses_what_it_must(value: str, form: str) -> None:
    assert not CHECKER.conforms(value, form)


async def test_the_advertised_schema_declares_the_formats(server: GeneratedServer) -> None:
    async with Client(server.create_server(handlers(server, None)), mode="legacy", cache=None) as client:
        schema = {t.name: t.output_schema for t in (await client.list_tools()).tools}["event_get"]
    bad = {"id": UID, "day": "2026-11-29", "at": "2026-11-29T17:30", "times": [], "days": [], "ids": []}
    bad["slot"] = {"start": "x"}
    envelope = {"data": bad, "rules": [], "suggestions": []}
    validator = jsonschema.Draft202012Validator(schema, format_checker=CHECKER)
    assert {e.json_path for e in validator.iter_errors(envelope)} == {"$.data.at", "$.data.slot.start"}


# --- datetime -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "sent"),
    [
        (datetime.datetime(2026, 11, 29, 17, 30, tzinfo=UTC), "2026-11-29T17:30:00+00:00"),
        (datetime.datetime(2026, 11, 29, 17, 30, tzinfo=PLUS_2), "2026-11-29T17:30:00+02:00"),
        (datetime.datetime(2026, 11, 29, 17, 30, 0, 250000, tzinfo=UTC), "2026-11-29T17:30:00.250000+00:00"),
        (datetime.datetime(2026, 11, 29, 17, 30), "2026-11-29T17:30:00+00:00"),  # naive: taken as UTC
        (datetime.datetime(2026, 7, 1, 9, 0, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")), "2026-07-01T09:00:00+02:00"),
        # local mean time (+00:09:21) has no RFC 3339 form: the same instant in UTC
        (datetime.datetime(1900, 1, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")), "1899-12-31T23:50:39+00:00"),
        ("2026-11-29T17:30:00Z", "2026-11-29T17:30:00Z"),  # RFC 3339 already: unchanged
        ("2026-11-29T17:30:00.123456789-05:00", "2026-11-29T17:30:00.123456789-05:00"),
        ("2026-11-29T17:30", "2026-11-29T17:30:00+00:00"),  # the string: naive, taken as UTC
        ("2026-11-29T17:30:00", "2026-11-29T17:30:00+00:00"),
        ("2026-11-29T17:30:00+05:30:15", "2026-11-29T11:59:45+00:00"),  # the same instant in UTC
        ("20261129T173000Z", "2026-11-29T17:30:00+00:00"),  # other ISO 8601 forms input accepts: re-formatted
    ],
)
async def test_datetime_forms_are_sent_as_rfc3339(server: GeneratedServer, value: object, sent: str) -> None:
    data = await emitted(server, "event_get", event(at=value, ended=value, times=[value, value], slot={"start": value}))
    assert data["at"] == data["ended"] == data["slot"]["start"] == sent
    assert data["times"] == [sent, sent]


@pytest.mark.parametrize(
    "value",
    [
        datetime.date(2026, 11, 29),  # a date is not an instant
        "2026-11-29",
        "2026-11-29 17:30:00+00:00",  # no T
        "2026-11-29T25:00:00Z",
        "2026-11-29t17:30:00z",
        "yesterday",
        1_764_437_400,  # a timestamp needs a `datetime` cast
        None,
    ],
)
async def test_other_datetimes_are_output_invalid_naming_the_field(server: GeneratedServer, value: object) -> None:
    assert "at result.at (expected an ISO 8601 date-time)" in await refused_at(server, "event_get", event(at=value))
    listed = await refused_at(server, "event_list", [event(), event(times=["2026-11-29T17:30:00Z", value])])
    assert "at result[1].times[1] (expected an ISO 8601 date-time)" in listed


async def test_a_datetime_beyond_year_9999_in_utc_is_output_invalid(server: GeneratedServer) -> None:
    far = datetime.datetime(9999, 12, 31, 23, 59, 59, tzinfo=datetime.timezone(-datetime.timedelta(seconds=30)))
    text = await refused_at(server, "event_get", event(slot={"start": far}))
    assert "at result.slot.start (expected a date-time whose UTC time is within years 1 to 9999)" in text


@pytest.mark.parametrize(
    ("sent", "echoed"),
    [("2026-11-29T17:30", "2026-11-29T17:30:00+00:00"), ("2026-11-29T17:30:00+02:00", "2026-11-29T17:30:00+02:00")],
)
async def test_an_input_datetime_echoed_back_validates(server: GeneratedServer, sent: str, echoed: str) -> None:
    assert await emitted(server, "event_echo", None, {"start": sent}) == {"start": echoed}


async def test_presented_values_validate_too(server: GeneratedServer) -> None:
    result = await call(server, "event_card", event(at=datetime.datetime(2026, 11, 29, 17, 30)))
    assert not result.is_error
    assert result.structured_content["data"]["at"] == "2026-11-29T17:30:00+00:00"


# --- date ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "sent"),
    [(datetime.date(2026, 11, 29), "2026-11-29"), (datetime.date(1, 1, 1), "0001-01-01"), ("2024-02-29", "2024-02-29")],
)
async def test_date_forms_are_sent_as_full_dates(server: GeneratedServer, value: object, sent: str) -> None:
    data = await emitted(server, "event_get", event(day=value, days=[value]))
    assert data["day"] == sent and data["days"] == [sent]


@pytest.mark.parametrize(
    "value",
    [
        datetime.datetime(2026, 11, 29, 17, 30, tzinfo=UTC),  # which day it is depends on a zone: a `date` cast says
        "2026-02-30",
        "20261129",
        "2026-W48-7",
        "2026-11-29T00:00:00Z",
        "٢٠٢٦-١١-٢٩",  # Arabic-Indic digits are not RFC 3339 digits
        None,
    ],
)
async def test_other_date_values_are_output_invalid_naming_the_field(server: GeneratedServer, value: object) -> None:
    text = await refused_at(server, "event_get", event(days=["2026-11-29", value]))
    assert "at result.days[1] (expected a date (YYYY-MM-DD))" in text


# --- uuid ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [uuid.UUID(UID), UID, UID.upper(), "{" + UID + "}", "urn:uuid:" + UID, UID.replace("-", "")],
)
async def test_uuid_forms_are_sent_canonical(server: GeneratedServer, value: object) -> None:
    data = await emitted(server, "event_get", event(id=value, ids=[value]))
    assert data["id"] == UID and data["ids"] == [UID]


@pytest.mark.parametrize("value", ["not-a-uuid", UID[:-1], 12345678, uuid.UUID(UID).bytes, None])
async def test_other_uuid_values_are_output_invalid_naming_the_field(server: GeneratedServer, value: object) -> None:
    assert "at result.id (expected a UUID)" in await refused_at(server, "event_get", event(id=value))


# --- casts --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "sent"),
    [
        (
            {"on": datetime.datetime(2026, 11, 29, 23, 30), "seen": 0, "since": datetime.date(2026, 11, 29)},
            {"on": "2026-11-29", "seen": "1970-01-01T00:00:00+00:00", "since": "2026-11-29T00:00:00+00:00"},
        ),
        (
            {"on": "2026-11-29T23:30:00+02:00", "seen": "2026-11-29T17:30", "since": "2026-11-29T08:00:00-05:00"},
            {"on": "2026-11-29", "seen": "2026-11-29T17:30:00+00:00", "since": "2026-11-29T08:00:00-05:00"},
        ),
    ],
)
async def test_cast_values_validate(server: GeneratedServer, row: dict[str, Any], sent: dict[str, Any]) -> None:
    assert await emitted(server, "legacy_get", row) == sent
