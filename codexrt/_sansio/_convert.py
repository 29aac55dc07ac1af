"""attrs ↔ wire: the one cattrs converter (no I/O).

codexrt's attrs value objects reach the wire (``serve`` lines, events, JSON-RPC params) as
camelCase dicts. Classes whose wire form is exactly their fields use this module instead of a
hand-written ``to_wire``:

* :func:`wire` (a class decorator) registers the class with :data:`converter`: every field
  under its camelCase name (``item_id`` → ``itemId``), in field order, tuples as lists;
  ``omit_none=True`` leaves out each field that holds its default (``None``, or ``()``);
  ``last`` names fields moved to the end (to keep a published key order);
* :func:`to_wire` / :func:`from_wire` convert one value (``from_wire`` ignores unknown keys
  and does **no** validation of its own: validating a host's input stays with the class).

Classes with a computed wire form (events, operation results, interactions, catalogs with their
native pages …) keep their own ``to_wire``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

__all__ = ["converter", "camel", "wire", "to_wire", "from_wire"]

T = TypeVar("T")

#: The converter every registered class goes through (tuples leave as lists).
converter = cattrs.Converter(unstruct_collection_overrides={tuple: list})


def camel(name: str) -> str:
    """``snake_case`` → ``camelCase`` (``default_reasoning_effort`` → ``defaultReasoningEffort``)."""
    first, *rest = name.split("_")
    return first + "".join(p[:1].upper() + p[1:] for p in rest)


def wire(*, omit_none: bool = False, last: tuple[str, ...] = ()) -> Callable[[type[T]], type[T]]:
    """Register an attrs class with :data:`converter` (see the module doc)."""

    def register(cls: type[T]) -> type[T]:
        attrs.resolve_types(cls)  # type: ignore[type-var]  # string annotations (PEP 563) → types
        fields = attrs.fields(cls)  # type: ignore[arg-type]
        renames = {f.name: override(rename=camel(f.name), omit_if_default=omit_none) for f in fields}
        unstructure = make_dict_unstructure_fn(cls, converter, **renames)  # type: ignore[arg-type]
        if last:
            wire_last = tuple(camel(n) for n in last)

            def ordered(obj: Any, _base: Callable[[Any], dict[str, Any]] = unstructure) -> dict[str, Any]:
                out = _base(obj)
                for key in wire_last:
                    if key in out:
                        out[key] = out.pop(key)
                return out

            converter.register_unstructure_hook(cls, ordered)
        else:
            converter.register_unstructure_hook(cls, unstructure)
        renamed = {f.name: override(rename=camel(f.name)) for f in fields}
        converter.register_structure_hook(cls, make_dict_structure_fn(cls, converter, **renamed))  # type: ignore[arg-type]
        return cls

    return register


def to_wire(obj: Any) -> dict[str, Any]:
    """The wire dict of a value of a :func:`wire` class."""
    return converter.unstructure(obj)  # type: ignore[no-any-return]


def from_wire(data: Any, cls: type[T]) -> T:
    """A value of ``cls`` from its wire dict (unknown keys ignored; no validation here)."""
    return converter.structure(data, cls)
