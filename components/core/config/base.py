"""The schema's building blocks: a strict frozen model with cross-field rules, values that say what they allow.

Every section of the stack config is a `Model`: camelCase keys in the stack
file, snake_case attributes in the program, unknown keys refused, frozen
once parsed. A field's type says what it accepts and, through `Allowed`,
how to say so; from the same description come the validation messages
(describe.what()), the JSON Schema (pydantic's, with `WithJsonSchema` where
a check is a function) and the README's type column (describe.doc_type()).

Rules are the checks that span fields. A `@rule("a", "b")` method yields
(key path, message) pairs and runs whenever fields a and b are valid, even
when other fields of the same section are not, so one run reports every
problem it can: relationships are judged on the values that parsed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from components.core.config.describe import Allowed, unwrap
from components.core.config.text.scalars import (
    BOOL_TEXTS,
    engine_bool,
    engine_int,
    engine_number,
    int_set_text,
    int_text,
    number_text,
    text_schema,
)
from components.core.problems import show

# Our own error type: its message is complete ("got 'x'; must be ...").
ERROR = "gpucluster"
RuleResult = Iterator[tuple[str, str]]


def problem(message: str) -> PydanticCustomError:
    """A validation error whose text is `message`, as is."""
    return PydanticCustomError(ERROR, "{message}", {"message": message})


# -- values -------------------------------------------------------------------------


def or_engine_int(schema: dict[str, Any], values: Iterable[int]) -> dict[str, Any]:
    """`schema` for an integer, or the text of one of `values` (for a Checked(Int(), ...)'s json_schema)."""
    return {"anyOf": [schema, text_schema(int_set_text(values))]}


def _bounded(kind: str, ge: float | None = None, gt: float | None = None, le: float | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind}
    for keyword, value in (("minimum", ge), ("exclusiveMinimum", gt), ("maximum", le)):
        if value is not None:
            schema[keyword] = value
    return schema


def Int(ge: int | None = None, le: int | None = None) -> Any:  # noqa: N802 (a type)
    """An integer within [ge, le], or the text of one (scalars.py: the engine's strings)."""
    text = int_text(ge, le)
    schema = {"anyOf": [_bounded("integer", ge=ge, le=le), text_schema(text)]}
    return Annotated[int, BeforeValidator(engine_int(text)), Strict(), Field(ge=ge, le=le), WithJsonSchema(schema)]


def Number(ge: float | None = None, gt: float | None = None, le: float | None = None) -> Any:  # noqa: N802
    """A finite number within the bounds, or the text of one."""
    text = number_text(ge, gt, le)
    schema = {"anyOf": [_bounded("number", ge=ge, gt=gt, le=le), text_schema(text)]}
    return Annotated[float, BeforeValidator(engine_number(text)), Strict(),
                     Field(ge=ge, gt=gt, le=le, allow_inf_nan=False), WithJsonSchema(schema)]


Bool = Annotated[bool, BeforeValidator(engine_bool), Strict(),
                 WithJsonSchema({"anyOf": [{"type": "boolean"}, {"enum": list(BOOL_TEXTS)}]})]


def Text(pattern: str | None = None, allowed: str = "a string", *, short: str | None = None,  # noqa: N802
         max_length: int | None = None, check: Callable[[str], str | None] | None = None,
         suggest: tuple[str, ...] = (), json_pattern: str | None = None, json_only: bool = False) -> Any:
    """A string matching `pattern` whole (and `check`, which returns why not), described as `allowed`.

    `suggest`: the values `check` accepts, as an enum for editors; `json_pattern`: the whole rule as a
    pattern, for editors, and checked last (`check`'s messages say more than a pattern could) unless
    `json_only`: a later layer of the program refuses what it refuses, in its own words (components.core.limits).
    """
    def validate(value: str) -> str:
        if pattern is not None and not re.fullmatch(pattern, value):
            raise problem(f"got {show(value)}; must be {allowed}")
        if max_length is not None and len(value) > max_length:
            raise problem(f"got {show(value)}; must be at most {max_length} characters")
        if check is not None and (reason := check(value)) is not None:
            raise problem(f"got {show(value)}; {reason}")
        if json_pattern is not None and not json_only and not re.fullmatch(json_pattern, value):
            raise problem(f"got {show(value)}; must be {allowed}")
        return value

    schema: dict[str, Any] = {"type": "string"}
    if pattern is not None or json_pattern is not None:
        schema["pattern"] = f"^(?:{json_pattern if json_pattern is not None else pattern})$"
    if max_length is not None:
        schema["maxLength"] = max_length
    if suggest:
        schema["enum"] = list(suggest)
    return Annotated[str, AfterValidator(validate), Allowed(allowed, short), WithJsonSchema(schema)]


def Checked(tp: Any, check: Callable[[Any], str | None], allowed: str | None = None,  # noqa: N802
            short: str | None = None, json_schema: dict[str, Any] | None = None) -> Any:
    """`tp`, and `check(value)` (why not, or None) on top; `allowed` says what passes, `json_schema` to editors."""
    def validate(value: Any) -> Any:
        if (reason := check(value)) is not None:
            raise problem(f"got {show(value)}; {reason}")
        return value

    extra: tuple[Any, ...] = (Allowed(allowed, short),) if allowed or short else ()
    if json_schema is not None:
        extra += (WithJsonSchema(json_schema),)
    return Annotated[tp, AfterValidator(validate), *extra]


def given(data: dict[str, Any], model: type[BaseModel], name: str, default: Any = None) -> Any:
    """What the input gives for field `name` (by its key or its name), in a before-validator."""
    field = model.model_fields[name]
    return data.get(field.alias, data.get(name, default))


def Choice(*choices: str) -> Any:  # noqa: N802
    """One of `choices`."""
    return Literal[choices]  # type: ignore[valid-type]


# -- the model -----------------------------------------------------------------------

# Units keep their spelling in keys: storageCapacityGiB, throughputPerTiB, readTargetMBpsPerGpu.
_UNITS = (("Gib", "GiB"), ("Tib", "TiB"), ("Mbps", "MBps"))


def key_name(attribute: str) -> str:
    """A stack file key from an attribute name: camelCase, units as written."""
    key = to_camel(attribute)
    for plain, unit in _UNITS:
        key = re.sub(rf"{plain}(?=[A-Z]|$)", unit, key)
    return key



def rule(*fields: str) -> Callable[[Callable[..., RuleResult]], Callable[..., RuleResult]]:
    """Mark a method as a cross-field rule over `fields` (attribute names); it yields (key path, message)."""
    def mark(fn: Callable[..., RuleResult]) -> Callable[..., RuleResult]:
        fn.__rule_fields__ = fields  # type: ignore[attr-defined]
        return fn
    return mark


class Model(BaseModel):
    """A section of the stack config: frozen, camelCase keys, unknown keys refused, rules run.

    Numbers and booleans are strict (`Int`, `Number`, `Bool`: no 4.0 for 4, no "yes" for true); lists may come as
    lists where a field keeps a tuple.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=key_name,
                              validate_by_name=True, validate_by_alias=True, regex_engine="python-re",
                              hide_input_in_errors=False)

    @classmethod
    def rules(cls) -> tuple[Callable[..., RuleResult], ...]:
        return _rules_of(cls)

    @model_validator(mode="wrap")
    @classmethod
    def _run_rules(cls, data: Any, handler: Callable[[Any], Model]) -> Model:
        try:
            model = handler(data)
        except ValidationError as err:
            if not isinstance(data, dict) or not cls.rules():
                raise
            partial, valid = partial_model(cls, data, error_locs(err))
            extra = rule_errors(partial, valid, data)
            if not extra:
                raise
            raise ValidationError.from_exception_data(cls.__name__, _details(err) + extra) from None
        extra = rule_errors(model, set(cls.model_fields), data)
        if extra:
            raise ValidationError.from_exception_data(cls.__name__, extra)
        return model


@functools.cache
def _rules_of(cls: type[Model]) -> tuple[Callable[..., RuleResult], ...]:
    """A section's rules, its bases' first (a class is complete once defined: looked up once)."""
    found: list[Callable[..., RuleResult]] = []
    for klass in reversed(cls.__mro__):
        found += [fn for fn in vars(klass).values() if hasattr(fn, "__rule_fields__")]
    return tuple(found)


def rule_errors(model: Model, valid: set[str], given: dict[str, Any]) -> list[InitErrorDetails]:
    """What the model's rules say, for the rules whose fields are all valid."""
    out = []
    for fn in type(model).rules():
        if not all(_is_valid(name, valid) for name in fn.__rule_fields__):
            continue
        for path, message in fn(model, given) if _takes_given(fn) else fn(model):
            loc = tuple(int(p) if p.isdigit() else p for p in re.split(r"[.\[\]]+", path) if p)
            out.append(InitErrorDetails(type=problem(message), loc=loc, input=None))
    return out


def _is_valid(name: str, valid: set[str]) -> bool:
    """A rule's field ("versions" or "versions.addons") is valid when it, or a section holding it, is."""
    parts = name.split(".")
    return any(".".join(parts[:i]) in valid for i in range(1, len(parts) + 1))


@functools.cache
def _takes_given(fn: Callable[..., RuleResult]) -> bool:
    return fn.__code__.co_argcount > 1


def _details(err: ValidationError) -> list[InitErrorDetails]:
    """A ValidationError's errors, to raise again with more."""
    out = []
    for e in err.errors(include_url=False):
        if e["type"] == ERROR:
            kind: Any = problem(e["ctx"]["message"])
        else:
            kind = e["type"]
        detail = InitErrorDetails(type=kind, loc=e["loc"], input=e["input"])
        if "ctx" in e and kind == e["type"]:
            detail["ctx"] = e["ctx"]
        out.append(detail)
    return out


def partial_model(cls: type[Model], data: dict[str, Any],
                  error_locs: list[tuple[Any, ...]]) -> tuple[Model, set[str]]:
    """The model built from what validated, and the names of what did ("storage", or "storage.s3Link" where
    only part of a section did). A list of sections counts as valid, with None in place of each entry that did
    not; a field the input leaves out takes its default, and a required one left out is not valid.

    `error_locs`: the locations of the errors `data` has (pydantic's, relative to this model).
    """
    values: dict[str, Any] = {}
    valid: set[str] = set()
    for name, field in cls.model_fields.items():
        key = field.alias if field.alias in data else name if name in data else None
        if key is None:
            if not field.is_required():
                valid.add(name)
            continue
        inner = [loc[1:] for loc in error_locs if loc[:1] == (key,)]
        value = data[key]
        if not inner:
            values[name] = _adapter(cls, name).validate_python(value)
            valid.add(name)
        elif (item := _section_item(field.annotation)) is not None and isinstance(value, list):
            # Entries keep their places (None for one with problems), so rules name the right index.
            entries: list[Any] = []
            for entry in value:
                try:
                    entries.append(item.model_validate(entry))
                except ValidationError:
                    entries.append(None)
            values[name] = tuple(entries)
            valid.add(name)
        elif _is_mapping(field.annotation) and isinstance(value, dict):
            # A mapping keeps the entries that validated.
            adapter = _adapter(cls, name)
            kept = {}
            for k, v in value.items():
                try:
                    kept.update(adapter.validate_python({k: v}))
                except ValidationError:
                    continue
            values[name] = kept
            valid.add(name)
        elif (section := _section(field.annotation)) is not None and isinstance(value, dict) and all(inner):
            values[name], inner_valid = partial_model(section, value, inner)
            valid |= {f"{name}.{n}" for n in inner_valid}
    return cls.model_construct(**values), valid


def error_locs(err: ValidationError) -> list[tuple[Any, ...]]:
    return [tuple(e["loc"]) for e in err.errors(include_url=False)]


def _is_mapping(annotation: Any) -> bool:
    return get_origin(unwrap(annotation).type) is dict


def _section(annotation: Any) -> type[Model] | None:
    tp = unwrap(annotation).type
    return tp if isinstance(tp, type) and issubclass(tp, Model) else None


@functools.cache
def _adapter(cls: type[Model], name: str) -> TypeAdapter:
    field = cls.model_fields[name]
    return TypeAdapter(Annotated[(field.annotation, *field.metadata)] if field.metadata else field.annotation)


def _section_item(annotation: Any) -> type[Model] | None:
    """The section type of a tuple/list of sections."""
    if get_origin(annotation) in (tuple, list):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], Model):
            return args[0]
    return None
