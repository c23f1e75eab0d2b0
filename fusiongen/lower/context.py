"""What every lowering step shares: the loaded spec and the diagnostics collected so far.

Lowering never stops at the first mistake: each check records a diagnostic here and carries on with
a best guess, so one run shows the user everything that is wrong. Concept modules receive this
context and the IR lowered before them; none of them reaches back into another.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

from fusiongen.diagnostics import Diagnostic
from fusiongen.load.loader import LoadedSpec, Loc
from fusiongen.load.spec import Spec
from fusiongen.names import IDENTIFIER, RESERVED_WORDS


@dataclass
class LowerContext:
    loaded: LoadedSpec
    diagnostics: list[Diagnostic] = field(default_factory=list)
    # Where each inline object is declared → the name of the model generated for it (lower/objects.py),
    # and back.
    inline_models: dict[Loc, str] = field(default_factory=dict)
    inline_locs: dict[str, Loc] = field(default_factory=dict)

    @property
    def spec(self) -> Spec:
        return self.loaded.spec

    def withdrawn(self, table: str, name: str) -> bool:
        """Whether `[table.name]` was set aside for a shape error: a reference to it is not reported again."""
        return (table, name) in self.loaded.withdrawn

    def model_loc(self, name: str) -> Loc:
        """Where model `name` is declared: its table, or the inline object it was generated for."""
        return self.inline_locs.get(name, ("models", name))

    def error(self, code: str, message: str, loc: Loc, *, hint: str | None = None, value: bool = False) -> None:
        """An error at `loc` (its key, or with `value` its value)."""
        self.diagnostics.append(self.loaded.diagnostic(code, message, loc, hint=hint, value=value))

    def warning(self, code: str, message: str, loc: Loc, *, hint: str | None = None) -> None:
        self.diagnostics.append(self.loaded.diagnostic(code, message, loc, hint=hint, warning=True))

    def check_identifier(self, name: str, loc: Loc, what: str, *, value: bool = True) -> bool:
        """Whether `name` can be a Python identifier in generated code; a diagnostic if not."""
        if not IDENTIFIER.match(name):
            self.error(
                "FG140",
                f'{what} "{name}" is not a valid Python identifier',
                loc,
                value=value,
                hint="use letters, digits and underscores, not starting with a digit",
            )
            return False
        if name in RESERVED_WORDS:
            self.error(
                "FG141",
                f'{what} "{name}" is a Python keyword or a reserved name',
                loc,
                value=value,
                hint="rename it; generated code uses it as an identifier",
            )
            return False
        return True

    def unknown_field(
        self, code: str, what: str, model: str, name: str, declared: Iterable[str], loc: Loc, *, value: bool = True
    ) -> None:
        close = difflib.get_close_matches(name, list(declared), n=1)
        self.error(
            code,
            f'{what} names "{name}", which is not a field of model "{model}"',
            loc,
            value=value,
            hint=f'did you mean "{close[0]}"?' if close else None,
        )
