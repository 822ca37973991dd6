"""Hypothesis strategies that build protobuf messages from their descriptors, for the RPC fuzz
(tests/component/test_rpc_fuzz.py).

Every field is filled from its type with the values that break code: NaN, ±inf, negatives,
zeros, huge numbers, timestamps far in the future and the past, long strings, unknown enum
values, long repeated fields, and unknown fields appended to the wire form. Two shapes:

- ``random_message``: every field drawn at random (unset, plausible or hostile);
- ``mutated``: a known-good message with one to three fields (at any depth) replaced by a
  hostile value, so that the fuzz also reaches the code behind the first checks.
"""
from __future__ import annotations

import time

from google.protobuf.descriptor import Descriptor, FieldDescriptor as F
from hypothesis import strategies as st

NOW = time.time()
"""Wall-clock time when the module loaded: timestamps are drawn around it."""

INF, NAN = float("inf"), float("nan")
HOSTILE_FLOATS = [NAN, INF, -INF, 0.0, -0.0, -1.0, -1e-9, 1e-300, 5e-324, 1e15, 1e300, -1e300, 1.7976931348623157e308,
                  NOW + 31.0, NOW + 3600.0, NOW + 1e9, NOW - 1e6, -NOW, 2.0 ** 63, 0.5, 1.0, 12.0, 3600.0, 1e9]
INT_BOUNDS = {
    F.TYPE_INT32: (-2 ** 31, 2 ** 31 - 1), F.TYPE_SINT32: (-2 ** 31, 2 ** 31 - 1), F.TYPE_SFIXED32: (-2 ** 31, 2 ** 31 - 1),
    F.TYPE_INT64: (-2 ** 63, 2 ** 63 - 1), F.TYPE_SINT64: (-2 ** 63, 2 ** 63 - 1), F.TYPE_SFIXED64: (-2 ** 63, 2 ** 63 - 1),
    F.TYPE_UINT32: (0, 2 ** 32 - 1), F.TYPE_FIXED32: (0, 2 ** 32 - 1),
    F.TYPE_UINT64: (0, 2 ** 64 - 1), F.TYPE_FIXED64: (0, 2 ** 64 - 1),
}
FLOAT_TYPES = (F.TYPE_DOUBLE, F.TYPE_FLOAT)
LONG_STRINGS = (32, 64, 256, 4097, 20_000)
LONG_LISTS = (65, 300, 3000)
LONG_MESSAGE_LISTS = (65, 300)
MAX_WIRE = 2 ** 21
"""Larger messages are left out: they only measure serialisation (the servers refuse them whole)."""


def floats() -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from([NAN, INF, -INF, -1.0, 0.0]), st.sampled_from(HOSTILE_FLOATS),
                     st.floats(allow_nan=True, allow_infinity=True), st.floats(0.0, 1e4),
                     st.floats(NOW - 1e5, NOW + 1e5))


def ints(t: int) -> st.SearchStrategy[int]:
    lo, hi = INT_BOUNDS[t]
    edges = sorted({v for v in (lo, hi, 0, 1, 2, 11, 12, 31, 64, 65, 512, 4096, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1,
                                2 ** 63 - 1, -1, -2) if lo <= v <= hi})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi), st.integers(max(lo, 0), min(hi, 300)))


def strings(pool: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(pool), st.text(max_size=12),
                     st.sampled_from(LONG_STRINGS).map(lambda n: "x" * n),
                     st.sampled_from(pool).map(lambda s: s + "\x00"), st.just("é" * 40),
                     st.sampled_from(["1" * 400, "-1", "+7", " 3", "1_000", "0x10", "9" * 20]))


def enums(f) -> st.SearchStrategy[int]:
    known = sorted(f.enum_type.values_by_number)
    return st.one_of(st.sampled_from(known), st.sampled_from([-1, max(known) + 1, 99, 2 ** 31 - 1, -2 ** 31]))


def scalar(f, pool: tuple[str, ...]) -> st.SearchStrategy:
    if f.type in FLOAT_TYPES:
        return floats()
    if f.type in INT_BOUNDS:
        return ints(f.type)
    if f.type == F.TYPE_BOOL:
        return st.booleans()
    if f.type == F.TYPE_STRING:
        return strings(pool)
    if f.type == F.TYPE_BYTES:
        return st.binary(max_size=64)
    if f.type == F.TYPE_ENUM:
        return enums(f)
    raise TypeError(f"no strategy for field {f.full_name} of type {f.type}")


def _is_map(f) -> bool:
    return f.type == F.TYPE_MESSAGE and f.message_type.GetOptions().map_entry


def value(f, pool: tuple[str, ...], depth: int) -> st.SearchStrategy:
    """A value for field *f* (a list for repeated fields, a dict for maps, a dict of fields for messages)."""
    if _is_map(f):
        k, v = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
        return st.dictionaries(scalar(k, pool), scalar(v, pool), max_size=3)
    one = fields(f.message_type, pool, depth + 1) if f.type == F.TYPE_MESSAGE else scalar(f, pool)
    if not f.is_repeated:
        return one
    long = LONG_MESSAGE_LISTS if f.type == F.TYPE_MESSAGE else LONG_LISTS
    return st.one_of(st.lists(one, max_size=3),
                     st.tuples(one, st.sampled_from(long)).map(lambda xn: [xn[0]] * xn[1]))


def fields(d: Descriptor, pool: tuple[str, ...], depth: int = 0) -> st.SearchStrategy[dict]:
    """A dict {field name: value} for message type *d*; nested messages stop at depth 3."""
    if depth > 3 or not d.fields:
        return st.just({})
    return st.fixed_dictionaries({}, optional={f.name: value(f, pool, depth) for f in d.fields})


def fill(msg, values: dict):
    """Set *values* (as drawn by :func:`fields`) on *msg*; returns *msg*."""
    d = msg.DESCRIPTOR
    for name, v in values.items():
        f = d.fields_by_name[name]
        if _is_map(f):
            getattr(msg, name).update(v)
        elif f.is_repeated and f.type == F.TYPE_MESSAGE:
            for item in v:
                fill(getattr(msg, name).add(), item)
        elif f.is_repeated:
            getattr(msg, name).extend(v)
        elif f.type == F.TYPE_MESSAGE:
            sub = getattr(msg, name)
            sub.SetInParent()
            fill(sub, v)
        else:
            setattr(msg, name, v)
    return msg


def paths(d: Descriptor, prefix: tuple = (), depth: int = 0) -> list[tuple]:
    """Every field path of *d* (through singular sub-messages, up to depth 3)."""
    out = []
    for f in d.fields:
        p = prefix + (f.name,)
        out.append(p)
        if f.type == F.TYPE_MESSAGE and not f.is_repeated and not _is_map(f) and depth < 3:
            out += paths(f.message_type, p, depth + 1)
    return out


def _field_at(d: Descriptor, path: tuple):
    f = None
    for name in path:
        f = d.fields_by_name[name]
        d = f.message_type
    return f


def mutated(template, pool: tuple[str, ...], most: int = 3) -> st.SearchStrategy:
    """*template* (a good message) with one to *most* fields, at any depth, set to fuzzed values."""
    d = template.DESCRIPTOR
    all_paths = paths(d)
    if not all_paths:
        return st.just(template)
    mutation = st.sampled_from(all_paths).flatmap(
        lambda p: st.tuples(st.just(p), value(_field_at(d, p), pool, len(p))))

    def apply(muts):
        m = type(template)()
        m.CopyFrom(template)
        for path, v in muts:
            target = m
            for name in path[:-1]:
                target = getattr(target, name)
            target.ClearField(path[-1])
            fill(target, {path[-1]: v})
        return m
    return st.lists(mutation, min_size=1, max_size=most).map(apply)


def unknown_fields() -> st.SearchStrategy[bytes]:
    """Wire bytes of fields no Cellbed message declares (numbers 1000+): a newer peer's message."""
    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            b, n = n & 0x7F, n >> 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def one(num_kind_payload) -> bytes:
        num, kind, payload = num_kind_payload
        if kind == 0:
            return varint(num << 3) + varint(payload % 2 ** 64)
        data = str(payload).encode()
        return varint(num << 3 | 2) + varint(len(data)) + data
    field = st.tuples(st.integers(1000, 2 ** 20), st.sampled_from([0, 2]), st.integers(0, 2 ** 64))
    return st.lists(field, max_size=3).map(lambda fs: b"".join(one(x) for x in fs))


def messages(cls, template, pool: tuple[str, ...]) -> st.SearchStrategy[bytes]:
    """Wire forms of fuzzed *cls* messages: random, or *template* with one field or a few
    mutated; with unknown fields appended now and then."""
    base = st.one_of(fields(cls.DESCRIPTOR, pool).map(lambda v: fill(cls(), v)), mutated(template, pool, 1),
                     mutated(template, pool, 3))
    wire = st.tuples(base, unknown_fields()).map(lambda mu: mu[0].SerializeToString() + mu[1])
    return wire.filter(lambda b: len(b) <= MAX_WIRE)


# --- the edges: every field of a good message, one at a time, set to each hostile value ------------------

EDGE_FLOATS = [NAN, INF, -INF, -1.0, 0.0, 5e-324, 1e300, NOW + 3600.0]
EDGE_STRINGS = ["", "x" * 64, "x" * 4097, "é" * 40, "a\nb", "1" * 400]


def _edge_scalars(f) -> list:
    if f.type in FLOAT_TYPES:
        return EDGE_FLOATS
    if f.type in INT_BOUNDS:
        lo, hi = INT_BOUNDS[f.type]
        return sorted({v for v in (lo, hi, 0, 12, 65, 2 ** 31 - 1, 2 ** 63 - 1, 2 ** 63) if lo <= v <= hi})
    if f.type == F.TYPE_BOOL:
        return [True, False]
    if f.type == F.TYPE_STRING:
        return EDGE_STRINGS
    if f.type == F.TYPE_ENUM:
        return [0, max(f.enum_type.values_by_number) + 1, -1]
    return [b"", b"\xff" * 65]


def edges(template) -> list:
    """*template* with one field changed, for every field (through singular sub-messages and the
    first item of repeated ones, three levels deep) and every hostile value of its type; repeated
    fields also emptied and made long (the first item, or a default one, 3000 or 300 times)."""
    out = []

    def walk(msg_path: tuple, d: Descriptor, depth: int) -> None:
        for f in d.fields:
            if _is_map(f):
                continue
            p = msg_path + (f.name,)
            if f.is_repeated:
                out.append((p, "clear", None))
                out.append((p, "long", None))
                if f.type == F.TYPE_MESSAGE:
                    if depth < 3:
                        walk(p + (0,), f.message_type, depth + 1)
                else:
                    out.extend((p + (0,), "set", v) for v in _edge_scalars(f))
            elif f.type == F.TYPE_MESSAGE:
                out.append((p, "clear", None))
                if depth < 3:
                    walk(p, f.message_type, depth + 1)
            else:
                out.extend((p, "set", v) for v in _edge_scalars(f))

    walk((), template.DESCRIPTOR, 0)
    msgs = []
    for path, op, v in out:
        m = type(template)()
        m.CopyFrom(template)
        if _edit(m, path, op, v):
            msgs.append(m)
    return msgs


def _edit(m, path: tuple, op: str, v) -> bool:
    """Apply one edge edit at *path* (field names, and item indices after repeated fields)."""
    if isinstance(path[-1], int):
        last, index, parents = path[-2], path[-1], path[:-2]
    else:
        last, index, parents = path[-1], None, path[:-1]
    target = m
    for j, step in enumerate(parents):
        if isinstance(step, int):
            continue                              # taken with the repeated field before it
        container = getattr(target, step)
        if j + 1 < len(parents) and isinstance(parents[j + 1], int):
            while len(container) <= parents[j + 1]:
                container.add()
            target = container[parents[j + 1]]
        else:
            target = container
    if index is not None:                         # an item of a repeated scalar field
        rep = getattr(target, last)
        if len(rep) > index:
            rep[index] = v
        else:
            rep.append(v)
        return True
    f = target.DESCRIPTOR.fields_by_name[last]
    if op == "clear":
        target.ClearField(last)
    elif op == "long":
        rep = getattr(target, last)
        n = 300 if f.type == F.TYPE_MESSAGE else 3000
        if f.type == F.TYPE_MESSAGE:
            item = type(rep.add())()
            if len(rep) > 1:
                item.CopyFrom(rep[0])
            del rep[:]
            for _ in range(n):
                rep.add().CopyFrom(item)
        else:
            first = rep[0] if len(rep) else _edge_scalars(f)[1]
            del rep[:]
            rep.extend([first] * n)
    else:
        setattr(target, last, v)
    return True
