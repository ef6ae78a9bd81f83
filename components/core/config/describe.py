"""How a config value's type is described: in messages ("an integer from 1 to 450"), the README's type column.

A field's annotation (pydantic's Annotated metadata, Optional unwrapped) is
a `Slot`; `Allowed`, `Missing`, `DefaultText` and `Secret` are the markers a
field adds to say what it allows, what its absence means, what its default
is when the program computes it, and that only a secret may hold it.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo


class Allowed:
    """How to say what a value may be: `text` in messages ("must be <text>"), `short` in the README.

    Without `text`, messages say what the type says ("an integer from 1200 to ...").
    """

    def __init__(self, text: str | None, short: str | None = None):
        self.text = text
        self.short = short or text or ""

    def __repr__(self) -> str:
        return f"Allowed({self.text!r})"


class Missing:
    """A field's message when it is absent (or empty where it must not be), instead of "is required (...)"."""

    def __init__(self, message: str):
        self.message = message


class DefaultText:
    """How the README states a default the program computes (`gpucluster-<stack>`)."""

    def __init__(self, text: str):
        self.text = text


class Secret:
    """A key only `pulumi config set --secret` may set: the stack file holds its ciphertext, never its value."""


class Slot(typing.NamedTuple):
    """What sits at a key path: its type, the constraints on it, and its field if it is one."""

    type: Any
    metadata: tuple[Any, ...]
    field: FieldInfo | None


def unwrap(tp: Any, metadata: tuple[Any, ...] = ()) -> Slot:
    """`tp` without Annotated and Optional, with the metadata collected."""
    while True:
        if get_origin(tp) is Annotated:
            tp, *more = get_args(tp)
            metadata = (*metadata, *more)
        elif get_origin(tp) in (types.UnionType, typing.Union) and type(None) in get_args(tp):
            rest = [a for a in get_args(tp) if a is not type(None)]
            tp = rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007
        else:
            return Slot(tp, metadata, None)


def field_slot(field: FieldInfo) -> Slot:
    slot = unwrap(field.annotation, tuple(field.metadata))
    return Slot(slot.type, slot.metadata, field)


def slot_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Slot | None:
    """The slot at pydantic's error location `loc` in `model` (None where the location leaves the schema)."""
    slot = Slot(model, (), None)
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        tp = slot.type
        origin = get_origin(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            field = _field_by_key(tp, part)
            if field is None:
                return None
            slot = field_slot(field)
        elif origin in (tuple, list) and isinstance(part, int):
            slot = unwrap(get_args(tp)[0])
        elif origin is dict:
            # pydantic locates a bad key as (..., <key>, "[key]"), a bad value as (..., <key>).
            key_type, value_type = get_args(tp)
            if parts[:1] == ["[key]"]:
                parts.pop(0)
                slot = unwrap(key_type)
            else:
                slot = unwrap(value_type)
        else:
            return None
    return slot


def _field_by_key(model: type[BaseModel], key: Any) -> FieldInfo | None:
    for name, field in model.model_fields.items():
        if key in (field.alias, name):
            return field
    return None


def _bounds(metadata: tuple[Any, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, FieldInfo):
            out.update(_bounds(tuple(m.metadata)))
        for name in ("ge", "gt", "le", "lt", "min_length", "max_length"):
            if isinstance(m, getattr(annotated_types, {"ge": "Ge", "gt": "Gt", "le": "Le", "lt": "Lt",
                                                        "min_length": "MinLen", "max_length": "MaxLen"}[name])):
                out[name] = getattr(m, name)
    return out


def _allowed(metadata: tuple[Any, ...]) -> Allowed | None:
    return next((m for m in metadata if isinstance(m, Allowed)), None)


def _range(noun: str, b: dict[str, Any]) -> str:
    lo = ("gt", ">") if "gt" in b else ("ge", ">=")
    low, high = b.get(lo[0]), b.get("le")
    if low is not None and high is not None and lo[0] == "ge":
        return f"{noun} from {_num(low)} to {_num(high)}"
    if low is not None and high is not None:
        return f"{noun} > {_num(low)} and <= {_num(high)}"
    if low is not None:
        return f"{noun} {lo[1]} {_num(low)}"
    if high is not None:
        return f"{noun} <= {_num(high)}"
    return noun


def _num(x: float) -> str:
    return f"{x:g}"


def what(slot: Slot) -> str:
    """What a value at `slot` must be, for messages: "an integer from 1 to 450", "one of a, b"."""
    if (allowed := _allowed(slot.metadata)) is not None and allowed.text is not None:
        return allowed.text
    tp, b = slot.type, _bounds(slot.metadata)
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(map(str, get_args(tp)))
    if tp is bool:
        return "true or false"
    if tp is int:
        return _range("an integer", b)
    if tp is float:
        return _range("a number", b)
    if tp is str:
        return "a string"
    if get_origin(tp) in (tuple, list):
        item = what(unwrap(get_args(tp)[0]))
        each = _each(item)
        return f"a {'non-empty ' if b.get('min_length') else ''}list{' of ' if not each.startswith('each') else ', '}{each}"
    if get_origin(tp) is dict:
        each = _each(what(unwrap(get_args(tp)[1])))
        return f"a mapping{' of ' if not each.startswith('each') else ', '}{each}"
    return "a mapping"


def _each(phrase: str) -> str:
    """ "an integer" -> "integers"; anything longer -> "each <phrase>"."""
    for article in ("an ", "a "):
        if phrase.startswith(article) and " " not in phrase[len(article):]:
            return phrase[len(article):] + "s"
    return f"each {phrase}"


def doc_type(slot: Slot) -> str:
    """The README's type column: `a` \\| `b`, int 1-450, a string's short description."""
    if (allowed := _allowed(slot.metadata)) is not None:
        return allowed.short
    tp, b = slot.type, _bounds(slot.metadata)
    if get_origin(tp) is Literal:
        return " \\| ".join(f"`{c}`" for c in get_args(tp))
    if tp is bool:
        return "bool"
    if tp in (int, float):
        noun = "int" if tp is int else "number"
        low, high = b.get("ge", b.get("gt")), b.get("le")
        if low is not None and high is not None:
            return f"{noun} {_num(low)}-{_num(high)}" if "gt" not in b else f"{noun} > {_num(low)}, <= {_num(high)}"
        if low is not None:
            return f"{noun} {'>' if 'gt' in b else '>='} {_num(low)}"
        return noun
    if get_origin(tp) in (tuple, list):
        return f"list of {_plural(doc_type(unwrap(get_args(tp)[0])))}"
    if get_origin(tp) is dict:
        return f"map of {doc_type(unwrap(get_args(tp)[0]))} to {doc_type(unwrap(get_args(tp)[1]))}"
    if tp is str:
        return "string"
    return "mapping"


def _plural(noun: str) -> str:
    """ "string" -> "strings", "IAM role/user ARN" -> "IAM role/user ARNs", "GPU type: a, b" -> "GPU types: a, b";
    a list of choices stays."""
    if ":" in noun:
        head, tail = noun.split(":", 1)
        return f"{_plural(head)}:{tail}"
    return noun if "`" in noun or "|" in noun or noun.endswith("s") else f"{noun}s"


def marker(slot: Slot, kind: type[Any]) -> Any:
    """The slot's metadata of `kind` (Missing, DefaultText), or None."""
    return next((m for m in slot.metadata if isinstance(m, kind)), None)


def missing_message(slot: Slot) -> str:
    found = marker(slot, Missing)
    return found.message if found is not None else f"is required ({what(slot)})"
