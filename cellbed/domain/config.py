"""One config loader for every TOML file and table Cellbed reads: unknown keys are refused with
the key, the file and the keys allowed there; a file that is missing or not valid TOML is one
line naming the file. Every agent config, scenario table and parameter block goes through here."""
from __future__ import annotations

import dataclasses
import tomllib
from typing import Any, Iterable, Mapping, TypeVar

from cellbed.domain.errors import InvalidArgument

T = TypeVar("T")

__all__ = ["check_keys", "dataclass_from", "field_names", "load_toml"]


def load_toml(path: str) -> dict[str, Any]:
    """The TOML file at *path* as a dict; InvalidArgument naming the file if it cannot be read."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise InvalidArgument(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InvalidArgument(f"{path}: is a folder, not a TOML file") from None
    except PermissionError:
        raise InvalidArgument(f"{path}: permission denied") from None
    except tomllib.TOMLDecodeError as e:
        raise InvalidArgument(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise InvalidArgument(f"{path}: not valid TOML: {e}") from None


def check_keys(data: Iterable[str], allowed: Iterable[str], where: str, *, dotted: str | None = None) -> None:
    """Refuse any key of *data* outside *allowed*: ``WHERE: unknown key(s) a, b; allowed: ...``.

    With *dotted* (the table's dotted path in a scenario file, "" at the top) the message names
    the first bad key by its dotted path, as scenario errors do:
    ``unknown key policy.san.x (allowed in policy.san: a, b)``; *allowed* keeps its order."""
    order = list(allowed)
    known = set(order)
    bad = [k for k in data if k not in known]
    if not bad:
        return
    if dotted is not None:
        key = f"{dotted}.{bad[0]}" if dotted else str(bad[0])
        raise InvalidArgument(f"unknown key {key} (allowed in {where}: {', '.join(order)})")
    raise InvalidArgument(f"{where}: unknown key(s) {', '.join(map(str, sorted(bad)))}; allowed: "
                          f"{', '.join(sorted(known)) or 'none'}")


def field_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def dataclass_from(cls: type[T], data: Mapping[str, Any], where: str) -> T:
    """``cls(**data)`` after :func:`check_keys` against the dataclass's fields."""
    check_keys(data, field_names(cls), where)
    return cls(**data)
