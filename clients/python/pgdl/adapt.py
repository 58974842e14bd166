"""numpy arrays in and out of PostgreSQL: psycopg 3 dumpers and loaders for real[].

An ndarray is sent as real[] (binary, bit for bit for float32; an n-D array flattened in C order,
since every pgdl function takes one-dimensional features). A real[] result loads as a float32 ndarray.
"""
import struct

import numpy as np
import psycopg
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format

FLOAT4_OID = psycopg.postgres.types["float4"].oid
FLOAT8_OID = psycopg.postgres.types["float8"].oid
INT8_OID = psycopg.postgres.types["int8"].oid
REAL_ARRAY_OID = psycopg.postgres.types["float4"].array_oid

# PostgreSQL's binary array: ndim, has-null flag, element type, then (length, lower bound) per dimension;
# each element is its byte length (-1 for NULL) and its bytes.
_HEADER = struct.Struct("!iiI")
_DIM = struct.Struct("!ii")
_ITEMS = np.dtype([("len", ">i4"), ("bits", ">u4")])


def as_float32(obj):
    """obj as a float32 ndarray: float32 as it is, other real numbers converted.

    A finite value beyond real's range is an error, as PostgreSQL's cast from double precision is,
    rather than becoming an infinity.
    """
    a = np.asarray(obj)
    if a.dtype == np.float32:
        return a
    if a.dtype.kind not in "fiu":
        raise TypeError(f"an ndarray of dtype {a.dtype} cannot be sent as real[]: only real numbers can")
    with np.errstate(over="ignore"):
        f = a.astype(np.float32)
    if a.dtype.kind == "f":
        overflow = np.isinf(f) & np.isfinite(a)
        if overflow.any():
            where = np.unravel_index(int(np.argmax(overflow)), a.shape)
            raise ValueError(f"value {a[where]!r} at index {where} is out of range for type real")
    return f


class Float32ArrayDumper(Dumper):
    """ndarray -> real[] in binary format, elements in C order; a masked array's masked elements as NULL."""

    format = Format.BINARY
    oid = REAL_ARRAY_OID

    def dump(self, obj):
        mask = np.ma.getmaskarray(obj).reshape(-1) if np.ma.isMaskedArray(obj) else None
        a = np.ascontiguousarray(as_float32(np.ma.filled(obj, 0) if mask is not None else obj)).reshape(-1)
        if a.size == 0:
            return _HEADER.pack(0, 0, FLOAT4_OID)
        items = np.empty(a.size, dtype=_ITEMS)
        items["len"] = 4
        items["bits"] = a.view(np.uint32)	# the bits as they are: NaN payloads and -0 survive
        if mask is None or not mask.any():
            return _HEADER.pack(1, 0, FLOAT4_OID) + _DIM.pack(a.size, 1) + items.tobytes()
        # a NULL element is its length, -1, with no bytes after it
        items["len"][mask] = -1
        keep = np.ones((a.size, _ITEMS.itemsize), dtype=bool)
        keep[mask, 4:] = False
        body = items.view(np.uint8).reshape(a.size, _ITEMS.itemsize)[keep]
        return _HEADER.pack(1, 1, FLOAT4_OID) + _DIM.pack(a.size, 1) + body.tobytes()


class Float32ArrayBinaryLoader(Loader):
    """real[] in binary format -> float32 ndarray shaped as the array (a masked array if it has NULLs)."""

    format = Format.BINARY

    def load(self, data):
        ndim, has_null, _ = _HEADER.unpack_from(data)
        if ndim == 0:
            return np.empty(0, dtype=np.float32)
        dims = tuple(_DIM.unpack_from(data, _HEADER.size + _DIM.size * d)[0] for d in range(ndim))
        offset = _HEADER.size + _DIM.size * ndim
        count = int(np.prod(dims))
        if not has_null:
            items = np.frombuffer(data, dtype=_ITEMS, count=count, offset=offset)
            return items["bits"].astype(np.uint32).view(np.float32).reshape(dims)
        return _load_with_nulls(data, offset, count, dims)


def _load_with_nulls(data, offset, count, dims):
    values = np.zeros(count, dtype=np.float32)
    mask = np.zeros(count, dtype=bool)
    for i in range(count):
        (length,) = struct.unpack_from("!i", data, offset)
        offset += 4
        if length < 0:
            mask[i] = True
        else:
            (values[i],) = struct.unpack_from("!f", data, offset)
            offset += length
    return np.ma.MaskedArray(values.reshape(dims), mask=mask.reshape(dims))


class Float32ArrayTextLoader(Loader):
    """real[] in text format -> float32 ndarray.

    PostgreSQL writes each real as the shortest text that reads back as the same value, so the array
    round-trips; a binary cursor (cursor(binary=True)) also keeps NaN payloads.
    """

    format = Format.TEXT

    def __init__(self, oid, context=None):
        super().__init__(oid, context)
        self._lists = psycopg.adapters.get_loader(REAL_ARRAY_OID, Format.TEXT)(oid, context)

    def load(self, data):
        text = bytes(data)
        if text.startswith(b"{") and b"{" not in text[1:] and b"NULL" not in text:
            body = text[1:-1]
            if not body:
                return np.empty(0, dtype=np.float32)
            return np.array(body.split(b","), dtype=np.bytes_).astype(np.float32)
        # several dimensions, lower bounds or NULLs: psycopg's nested lists, then an array
        nested = np.array(self._lists.load(data), dtype=object)
        mask = np.equal(nested, None)
        values = np.where(mask, 0.0, nested).astype(np.float32)
        return np.ma.MaskedArray(values, mask=mask) if mask.any() else values


class _Float32Dumper(Dumper):
    format = Format.BINARY
    oid = FLOAT4_OID

    def dump(self, obj):
        return struct.pack("!f", obj)


class _Float64Dumper(Dumper):
    format = Format.BINARY
    oid = FLOAT8_OID

    def dump(self, obj):
        return struct.pack("!d", obj)


class _Int64Dumper(Dumper):
    format = Format.BINARY
    oid = INT8_OID

    def dump(self, obj):
        return struct.pack("!q", int(obj))	# struct raises for a uint64 beyond bigint


def register(context=None):
    """Send ndarrays as real[] and load real[] as float32 ndarrays on `context`.

    `context`: a connection, a cursor, or None for every connection made afterwards (psycopg.adapters).
    numpy scalars are sent too: float32 as real, other floats as double precision, integers as bigint.
    """
    adapters = psycopg.adapters if context is None else context.adapters
    adapters.register_dumper(np.ndarray, Float32ArrayDumper)
    adapters.register_dumper(np.float32, _Float32Dumper)
    adapters.register_dumper(np.floating, _Float64Dumper)
    adapters.register_dumper(np.integer, _Int64Dumper)
    adapters.register_loader(REAL_ARRAY_OID, Float32ArrayBinaryLoader)
    adapters.register_loader(REAL_ARRAY_OID, Float32ArrayTextLoader)
    return context
