"""yaml.v3's reading of a plain scalar, and Go's writing of a value back: what the program gets.

The Pulumi CLI reads a stack file with gopkg.in/yaml.v3 v3.0.1 (resolve.go)
and hands each top-level value to the program as text (MarshalString, Go's
float formatting). components.core.config.text.stack_yaml reads the file's
structure; this is the typing of one value.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
NULLS = ("", "~", "null", "Null", "NULL")
_DECIMAL_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*)")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")  # yaml.v3 yamlStyleFloat
_OTHER_INT = re.compile(r"[-+]?0([0-7_]+|[xX][0-9a-fA-F_]+|[oO][0-7_]+|[bB][01_]+|[0-9_]+)")
_SPECIAL_FLOAT = re.compile(r"[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")
# yaml.v3 resolve.go allowedTimestampFormats, the date-first ones.
_TIMESTAMP = re.compile(r"\d{4}-\d{1,2}-\d{1,2}([Tt ]\d{1,2}:\d{1,2}:\d{1,2}(\.\d*)?\s*(Z|[-+]\d{1,2}(:?\d{2})?)?)?")


def plain(text: str) -> tuple[Any, str | None]:
    """A plain scalar's value by yaml.v3's rules (resolve.go), or (None, why that reading would surprise)."""
    if text in BOOLS:
        return BOOLS[text], None
    if text in NULLS:
        return None, None
    if _SPECIAL_FLOAT.fullmatch(text):
        return None, f"got {text}; the Pulumi CLI cannot load a stack file holding .inf or .nan (quote it if you " \
                     "mean the text)"
    if _DECIMAL_INT.fullmatch(text) and not text.startswith(("_", "-_", "+_")):
        return int(text.replace("_", "")), None
    if _OTHER_INT.fullmatch(text) and text.lstrip("+-") not in ("0",):
        meant = _go_int(text)
        shown, instead = (f"the number {meant}", meant) if meant is not None else ("a number", "the decimal")
        return None, (f"got {text}, which the Pulumi CLI reads as {shown} (YAML 1.1 octal, hex or binary); quote "
                      f"it (\"{text}\") to keep the text, or write {instead}")
    if _FLOAT.fullmatch(text.replace("_", "")):
        number = float(text.replace("_", ""))
        if math.isinf(number):
            return text, None  # overflow: yaml.v3 keeps it a string
        return (int(number) if number.is_integer() and abs(number) < 2**63 else number), None
    if _TIMESTAMP.fullmatch(text):
        return None, (f"got {text}, which the Pulumi CLI turns into Go's date text (\"{text} 00:00:00 +0000 UTC\"); "
                      f"quote it (\"{text}\")")
    return text, None


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), as yaml.v3 calls it (underscores removed; a leading 0 is octal)."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-").replace("_", "")
    prefixes = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}
    try:
        if body[:2] in prefixes:
            return sign * int(body[2:], prefixes[body[:2]])
        return sign * int(body, 8)
    except ValueError:
        return None  # 08, 09: yaml.v3 reads them as floats 8 and 9


def go_text(value: Any) -> str:
    """A top-level config value as the program receives it (Pulumi's MarshalString, Go's float formatting)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float):
        return _go_float(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _go_float(number: float) -> str:
    """encoding/json's float64 text: plain decimals from 1e-6 up to 1e21, exponents outside."""
    if number == 0:
        return "0"
    if 1e-6 <= abs(number) < 1e21:
        text = format(Decimal(repr(number)), "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa, _, exponent = repr(number).partition("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent or 0):+d}"
