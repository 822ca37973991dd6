"""Pure checks of values received at a service boundary (issue 13, part 5), and their limits.

Every check raises :class:`cellbed.domain.errors.InvalidArgument` with one line naming the field
and what is allowed, and a short ``reason`` (the key an agent counts a dropped MQTT message
under): ``not_finite``, ``out_of_range``, ``future_timestamp``, ``too_long``, ``too_many``,
``unknown_enum``, ``missing`` or ``malformed``. A refused value is never echoed whole: strings
are shown by their length, or cut (:func:`shown`).

The message checks built on these (one per request and MQTT message type) are in
``cellbed.domain.wire_checks`` (node, MASB) and ``cellbed.domain.wire_checks_megha``.
"""
from __future__ import annotations

import math
from typing import Sequence, TypeVar

from cellbed.domain.errors import InvalidArgument, check_range

T = TypeVar("T")

# --- limits (the message checks and the fuzz test use these) ------------------------------------------
MAX_NAME = 63
"""Host, agent, instance, user, task and id names: the domain's name rule allows 63 characters
(identity names, DNS labels); VM and task names are stricter still (vm.NAME_RE, 31)."""
MAX_TEXT = 4096
"""Free text (details, reasons): 4 KiB."""
MAX_ATTR_TEXT = 255
"""Attribute names and values, and constraint values (GCD: hashed strings or integers)."""
MAX_CONSTRAINTS = 64
"""Placement constraints per task."""
MAX_ATTRIBUTES = 256
"""Attributes per host."""
MAX_CORES = 1e8
"""CPU, cores: an upper bound far above any cell (also for sums over a cluster)."""
MAX_MIB = 1e12
"""Memory, MiB (an exbibyte): idem."""
MIN_CAPACITY = 1e-6
"""A capacity (cores, MiB) is at least this: > 0, and far enough from 0 that use / capacity
stays finite for every use up to MAX_CORES / MAX_MIB."""
MAX_DURATION_S = 1e9
"""A task's run time, s (about 31 years)."""
MAX_MS = 1e12
"""Measured intervals, ms."""
MAX_CLOCK_SKEW_S = 30.0
"""Default of every agent's ``max_clock_skew_s``: how far in the future a received timestamp may
lie (the sender's clock runs ahead of the receiver's). Past timestamps are accepted."""
INT64 = (-2 ** 63, 2 ** 63 - 1)


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to about *limit* characters (a refused value may be megabytes)."""
    r = repr(value)
    return r if len(r) <= limit else f"{r[:limit]}... ({len(value) if hasattr(value, '__len__') else len(r)} long)"


def _reason(value: float) -> str:
    return "not_finite" if isinstance(value, float) and not math.isfinite(value) else "out_of_range"


def finite_in_range(field: str, value: float, lo: float, hi: float, unit: str = "") -> float:
    """*value*, if it is a finite number in [lo, hi] (errors.check_range, which names the range)."""
    check_range(field, value, lo, hi, unit)
    return value


def positive(field: str, value: float, hi: float = math.inf, unit: str = "") -> float:
    """*value*, if it is a finite number in (0, hi] (a capacity, a request)."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= hi):
        u = f" {unit}" if unit else ""
        raise InvalidArgument(f"{field}={value!r}{u} is out of range: allowed > 0 and ≤ {hi:g}{u}",
                              reason=_reason(value))
    return value


def bounded_str(field: str, s: str, max_len: int = MAX_NAME, *, required: bool = False) -> str:
    """*s*, if it has at most *max_len* characters (and is not empty when *required*)."""
    if required and not s:
        raise InvalidArgument(f"{field} must be set", reason="missing")
    if len(s) > max_len:
        raise InvalidArgument(f"{field} is {len(s)} characters long: allowed at most {max_len}", reason="too_long")
    return s


def bounded_list(field: str, xs: Sequence[T], max_len: int) -> Sequence[T]:
    """*xs*, if it has at most *max_len* items."""
    if len(xs) > max_len:
        raise InvalidArgument(f"{field} has {len(xs)} items: allowed at most {max_len}", reason="too_many")
    return xs


def timestamp(field: str, t: float, now: float, skew: float = MAX_CLOCK_SKEW_S) -> float:
    """*t* (Unix seconds), if it is finite, not negative, and at most *skew* seconds after *now*
    (the receiver's clock). 0 is "not set"; a past time is fine."""
    if not (isinstance(t, (int, float)) and math.isfinite(t) and t >= 0):
        raise InvalidArgument(f"{field}={t!r} s is out of range: allowed a Unix time ≥ 0 s", reason=_reason(t))
    if t > now + skew:
        raise InvalidArgument(f"{field}={t!r} s is {t - now:.3g} s in the future: allowed at most {skew:g} s "
                              f"ahead of this agent's clock ({now:.3f})", reason="future_timestamp")
    return t


def enum_value(field: str, v: int, enum_descriptor, *, unspecified: bool = True) -> int:
    """*v*, if it is a value of *enum_descriptor* (a protobuf EnumDescriptor); 0 (UNSPECIFIED)
    only when *unspecified*."""
    if v not in enum_descriptor.values_by_number or (v == 0 and not unspecified):
        allowed = ", ".join(f"{x.name} ({x.number})" for x in enum_descriptor.values if x.number or unspecified)
        raise InvalidArgument(f"{field}={v} is not a known {enum_descriptor.name}: allowed {allowed}",
                              reason="unknown_enum")
    return v


def integer_text(field: str, text: str) -> int:
    """The integer *text* spells in decimal (an attribute or constraint value marked integer),
    if it fits in 64 bits."""
    try:
        v = int(text)
    except ValueError:
        raise InvalidArgument(f"{field}={shown(text)} is marked integer but is not one", reason="malformed") from None
    if not INT64[0] <= v <= INT64[1]:
        raise InvalidArgument(f"{field}={shown(text)} is out of range: allowed a 64-bit integer", reason="out_of_range")
    return v


def same_length(field: str, n: int, other: str, m: int) -> None:
    """Parallel repeated fields must have as many items as each other."""
    if n != m:
        raise InvalidArgument(f"{field} has {n} items, {other} has {m}: they must have as many", reason="malformed")
