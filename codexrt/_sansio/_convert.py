"""attrs ↔ wire: the one cattrs converter (no I/O).

codexrt's attrs value objects reach the wire (``serve`` lines, events, JSON-RPC params) as
camelCase dicts. Classes whose wire form is exactly their fields use this module instead of a
hand-written ``to_wire``:

* :func:`wire` (a class decorator) registers the class with :func:`converter`: every field
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
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

if TYPE_CHECKING:
    import cattrs

__all__ = ["converter", "camel", "wire", "to_wire", "from_wire"]

T = TypeVar("T")

#: The classes :func:`wire` registered, with their options (``omit_none``, ``last``). Their
#: cattrs hooks are generated when a value of the class is first converted, not when the class
#: is defined: code generation and ``import cattrs`` are most of what importing a module of
#: wire classes cost, and ``codexrt serve`` answers its first ``status`` without them (issue 34).
_WIRE: dict[type, tuple[bool, tuple[str, ...]]] = {}
_converter: list[cattrs.Converter] = []


def converter() -> cattrs.Converter:
    """The converter every registered class goes through (tuples leave as lists), made on
    first use."""
    if not _converter:
        import cattrs

        conv = cattrs.Converter(unstruct_collection_overrides={tuple: list})
        conv.register_unstructure_hook_factory(_registered, _unstructure_fn)
        conv.register_structure_hook_factory(_registered, _structure_fn)
        _converter.append(conv)
    return _converter[0]


def _registered(cls: Any) -> bool:
    return isinstance(cls, type) and cls in _WIRE


def _unstructure_fn(cls: type) -> Callable[[Any], dict[str, Any]]:
    from cattrs.gen import make_dict_unstructure_fn, override

    omit_none, last = _WIRE[cls]
    attrs.resolve_types(cls)  # string annotations (PEP 563) → types
    renames = {f.name: override(rename=camel(f.name), omit_if_default=omit_none) for f in attrs.fields(cls)}
    unstructure = make_dict_unstructure_fn(cls, converter(), **renames)
    if not last:
        return unstructure
    wire_last = tuple(camel(n) for n in last)

    def ordered(obj: Any, _base: Callable[[Any], dict[str, Any]] = unstructure) -> dict[str, Any]:
        out = _base(obj)
        for key in wire_last:
            if key in out:
                out[key] = out.pop(key)
        return out

    return ordered


def _structure_fn(cls: type) -> Callable[[Any, Any], Any]:
    from cattrs.gen import make_dict_structure_fn, override

    attrs.resolve_types(cls)
    renamed = {f.name: override(rename=camel(f.name)) for f in attrs.fields(cls)}
    return make_dict_structure_fn(cls, converter(), **renamed)


def camel(name: str) -> str:
    """``snake_case`` → ``camelCase`` (``default_reasoning_effort`` → ``defaultReasoningEffort``)."""
    first, *rest = name.split("_")
    return first + "".join(p[:1].upper() + p[1:] for p in rest)


def wire(*, omit_none: bool = False, last: tuple[str, ...] = ()) -> Callable[[type[T]], type[T]]:
    """Register an attrs class with :func:`converter` (see the module doc)."""

    def register(cls: type[T]) -> type[T]:
        if not attrs.has(cls):
            raise TypeError(f"{cls.__name__} is not an attrs class")
        _WIRE[cls] = (omit_none, tuple(last))
        return cls

    return register


def to_wire(obj: Any) -> dict[str, Any]:
    """The wire dict of a value of a :func:`wire` class."""
    return converter().unstructure(obj)  # type: ignore[no-any-return]


def from_wire(data: Any, cls: type[T]) -> T:
    """A value of ``cls`` from its wire dict (unknown keys ignored; no validation here)."""
    return converter().structure(data, cls)
