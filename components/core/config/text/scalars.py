"""Numbers and booleans as text: what the program reads from a string, and the same as a pattern for editors.

The Pulumi engine passes top-level values as strings, and `pulumi config set
--path` stores decimals as strings ("5.5"); a stack file may quote a number
too. The program reads such a string as the number or boolean only when it
matches the field's pattern, and that pattern, bounds included, is what the
JSON Schema gives editors: `"0"` is no more a valid `count` (1-20) to an
editor than to the program.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

# What yaml.v3 and the engine write for a boolean (and quoted spellings of it): no "yes", no "tRuE".
BOOL_TEXTS = {"true": True, "false": False, "True": True, "False": False, "TRUE": True, "FALSE": False}
_SPACE = r"\s*"
# A decimal as Python's float() and JSON Schema's readers both take it: no sign, no underscores, no inf/nan;
# at most 30 characters and a two-digit exponent, so a nonzero one never rounds to 0 or overflows.
_MANTISSA = r"(?:[0-9]+\.?[0-9]*|\.[0-9]+)"
_EXPONENT = r"(?:[eE][-+]?[0-9]{1,2})?"
_SHORT = r"(?=[^\s]{1,30}\s*$)"


def text_schema(pattern: str) -> dict[str, Any]:
    return {"type": "string", "pattern": pattern}


def int_text(ge: int | None = None, le: int | None = None) -> str:
    """A pattern for the text of an integer from `ge` to `le` (leading zeros and spaces allowed): `^\\s*0*(?:...)\\s*$`."""
    if ge is None or ge < 0:
        if le is not None:
            raise NotImplementedError("an integer text with an upper bound needs a lower bound >= 0")
        return rf"^{_SPACE}-?[0-9]+{_SPACE}$"
    return rf"^{_SPACE}0*(?:{'|'.join(_int_range(ge, le))}){_SPACE}$"


def int_set_text(values: Iterable[int]) -> str:
    """A pattern for the text of one of `values` (non-negative): a trie, so it stays short for many values."""
    texts = sorted({str(v) for v in values})
    # A suffix every value ends in once (the 00 of multiples of 2400), outside the trie.
    suffix = texts[0]
    while suffix and not all(t.endswith(suffix) and len(t) > len(suffix) for t in texts):
        suffix = suffix[1:]
    return rf"^{_SPACE}0*{_trie([t.removesuffix(suffix) for t in texts])}{suffix}{_SPACE}$"


def number_text(ge: float | None = None, gt: float | None = None, le: float | None = None) -> str:
    """A pattern for the text of a number within the bounds the schema uses: none, >= 0, > 0, or > 0 and <= 1."""
    bounds = (ge, gt, le)
    if bounds == (None, None, None):
        body = rf"{_SHORT}-?{_MANTISSA}{_EXPONENT}"
    elif bounds == (0, None, None):
        body = rf"{_SHORT}{_MANTISSA}{_EXPONENT}"
    elif bounds == (None, 0, None):
        body = rf"{_SHORT}(?=[0-9.]*[1-9]){_MANTISSA}{_EXPONENT}"
    elif bounds == (None, 0, 1):
        body = r"0*(?:1(?:\.0*)?|\.(?=[0-9]*[1-9])[0-9]+)"
    else:
        raise NotImplementedError(f"no number text for bounds ge={ge} gt={gt} le={le}")
    return rf"^{_SPACE}{body}{_SPACE}$"


def engine_int(pattern: str) -> Callable[[Any], Any]:
    """A before-validator: text matching `pattern` is its integer; anything else goes on as it is (and fails)."""
    compiled = re.compile(pattern)

    def read(value: Any) -> Any:
        return int(value) if isinstance(value, str) and compiled.search(value) else value
    return read


def engine_number(pattern: str) -> Callable[[Any], Any]:
    compiled = re.compile(pattern)

    def read(value: Any) -> Any:
        return float(value) if isinstance(value, str) and compiled.search(value) else value
    return read


def engine_bool(value: Any) -> Any:
    return BOOL_TEXTS[value] if isinstance(value, str) and value in BOOL_TEXTS else value


# -- integer ranges as patterns ---------------------------------------------------------------


def _int_range(low: int, high: int | None) -> list[str]:
    """Alternatives matching the integers low..high (high None: no bound) written without leading zeros."""
    top = high if high is not None else 10 ** len(str(low)) - 1
    out: list[str] = []
    for digits in range(len(str(low)), len(str(top)) + 1):
        a, b = max(low, 10 ** (digits - 1) if digits > 1 else 0), min(top, 10 ** digits - 1)
        if a <= b:
            out += _same_length(str(a), str(b))
    if high is None:
        out.append(rf"[1-9][0-9]{{{len(str(low))},}}")
    return out


def _same_length(a: str, b: str) -> list[str]:
    """Alternatives matching the numbers a..b, both of the same number of digits."""
    if a == b:
        return [a]
    if len(a) == 1:
        return [f"[{a}-{b}]"]
    if a[0] == b[0]:
        return [a[0] + _group(_same_length(a[1:], b[1:]))]
    rest = len(a) - 1
    out = []
    first, last = int(a[0]), int(b[0])
    if a[1:] != "0" * rest:
        out.append(a[0] + _group(_same_length(a[1:], "9" * rest)))
        first += 1
    if b[1:] != "9" * rest:
        last -= 1
    if first <= last:
        out.append(f"[{first}-{last}][0-9]{{{rest}}}" if rest > 1 else f"[{first}-{last}][0-9]")
    if b[1:] != "9" * rest:
        out.append(b[0] + _group(_same_length("0" * rest, b[1:])))
    return out


def _group(options: list[str]) -> str:
    return options[0] if len(options) == 1 and "|" not in options[0] else f"(?:{'|'.join(options)})"


def _trie(texts: list[str]) -> str:
    tree: dict[str, Any] = {}
    for text in texts:
        node = tree
        for char in text:
            node = node.setdefault(char, {})
        node[""] = {}

    def pattern(node: dict[str, Any]) -> str:
        branches = [char + pattern(sub) for char, sub in sorted(node.items()) if char]
        if not branches:
            return ""
        if len(branches) == 1 and "" not in node:
            return branches[0]
        return f"(?:{'|'.join(branches)})" + ("?" if "" in node else "")
    return pattern(tree)
