"""The containers handlers return data in, besides plain dicts: presenters must shape and mask them all alike."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


class Registry(dict):  # type: ignore[type-arg]  # a dict subclass, as ORMs return
    pass


class ReadOnly(Mapping):  # type: ignore[type-arg]  # a Mapping that is not a dict
    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class Plain:
    """An object with attributes."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)
