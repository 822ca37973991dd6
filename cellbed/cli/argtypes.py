"""Argument types for cellctl's flags: every value is checked on the client, before any call.

Each factory returns an argparse ``type`` whose refusal (argparse.ArgumentTypeError) names the
allowed range and the value given; argparse prefixes the flag, and cellctl prints the whole as one
line and exits 2 (cellbed/cli/parser.py). The ranges are the ones the servers enforce
(cellbed/domain/vm.py), so a value the client accepts is never refused later for its range.
"""
from __future__ import annotations

import argparse
import math
import re
from typing import Callable

from cellbed.domain import vm as vmdom

Conv = Callable[[str], object]


def _fmt(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _range_text(lo: float, hi: float, unit: str) -> str:
    return f"allowed {_fmt(lo)}..{_fmt(hi)}{' ' + unit if unit else ''}"


def int_in(lo: int, hi: int, unit: str = "") -> Conv:
    """An integer in [lo, hi]."""
    def conv(text: str) -> int:
        try:
            v = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_range_text(lo, hi, unit)} (an integer), got {text!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{_range_text(lo, hi, unit)}, got {text}")
        return v
    conv.__name__ = "integer"
    return conv


def float_in(lo: float, hi: float, unit: str = "", also: str = "") -> Conv:
    """A finite number in [lo, hi] (NaN and infinities are refused); *also* names what else the
    flag takes, for the message."""
    allowed = _range_text(lo, hi, unit) + (f" {also}" if also else "")

    def conv(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{allowed} (a number), got {text!r}") from None
        if not math.isfinite(v) or not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{allowed}, got {text}")
        return v
    conv.__name__ = "number"
    return conv


_dirty_mib_s = float_in(*vmdom.DIRTY_MIB_S_RANGE, "MiB/s", also="or max")


def dirty_rate(text: str) -> float:
    """MiB/s in the guest's range, or ``max`` (as fast as the guest can), returned as math.inf."""
    return math.inf if text.strip().lower() == "max" else _dirty_mib_s(text)


dirty_rate.__name__ = "dirty rate"


def list_of(item: Conv, max_items: int = 64) -> Conv:
    """A comma-separated list of 1..max_items values, each checked by *item*."""
    def conv(text: str) -> list:
        parts = [p.strip() for p in text.split(",")]
        if not text.strip() or any(not p for p in parts):
            raise argparse.ArgumentTypeError(f"a comma-separated list of 1..{max_items} values, got {text!r}")
        if len(parts) > max_items:
            raise argparse.ArgumentTypeError(f"at most {max_items} values, got {len(parts)}")
        out = []
        for p in parts:
            try:
                out.append(item(p))
            except argparse.ArgumentTypeError as e:
                raise argparse.ArgumentTypeError(f"item {p!r}: {e}") from None
        return out
    conv.__name__ = "list"
    return conv


_NAME = re.compile(vmdom.NAME_RE.pattern)


def vm_name(text: str) -> str:
    if not _NAME.match(text):
        raise argparse.ArgumentTypeError(f"allowed [a-z0-9][a-z0-9-]{{0,30}}, got {text!r}")
    return text


vm_name.__name__ = "name"


def host_name(text: str) -> str:
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", text):
        raise argparse.ArgumentTypeError(f"allowed a host name such as h1 ([a-z0-9][a-z0-9-]{{0,62}}), got {text!r}")
    return text


host_name.__name__ = "host"


def key_value(text: str) -> str:
    """KEY=VALUE with a non-empty dotted key; the value is checked by whoever owns the key."""
    k, sep, _ = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", k.strip()):
        raise argparse.ArgumentTypeError(f"allowed KEY=VALUE with a key like run.seed, got {text!r}")
    return text


key_value.__name__ = "KEY=VALUE"


def address(text: str) -> str:
    """HOST:PORT with a port in 1..65535."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"allowed HOST:PORT with a port in 1..65535, got {text!r}")
    return text


address.__name__ = "HOST:PORT"


def on_off(text: str) -> bool:
    """on or off, as a bool."""
    if text not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"allowed on, off, got {text!r}")
    return text == "on"


on_off.__name__ = "on|off"


def or_blank(conv: Conv) -> Conv:
    """*conv*, but an empty value stays empty (the flag's "not given": the default is taken)."""
    def blank(text: str):
        return text if text == "" else conv(text)
    blank.__name__ = getattr(conv, "__name__", "value")
    return blank


def dask_address(text: str) -> str:
    """A Dask scheduler's address: tcp://HOST:PORT or tls://HOST:PORT."""
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in ("tcp", "tls"):
        raise argparse.ArgumentTypeError(f"allowed tcp://HOST:PORT or tls://HOST:PORT, got {text!r}")
    try:
        address(rest)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"allowed {scheme}://HOST:PORT with a port in 1..65535, got {text!r}") from None
    return text


dask_address.__name__ = "tcp|tls://HOST:PORT"


def explain_share(text: str) -> float:
    """all, or a share of decisions in 0..1 (or a percentage: 5%)."""
    if text == "all":
        return 1.0
    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"allowed all, a share 0..1 or a percentage such as 5%, got {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"allowed all, a share 0..1 or a percentage 0%..100%, got {text!r}")
    return v


explain_share.__name__ = "all|SHARE"
