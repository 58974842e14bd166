"""A DataFrame into a table by COPY, and pgdl.pack with the facts of the dataset it made."""
from __future__ import annotations

import decimal
import math
import uuid
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pandas as pd
from pandas.api import types as ptypes
from psycopg import sql

from ._sql import call, cursor, relation
from .adapt import as_float32

_IF_EXISTS = ("fail", "replace", "append")


@dataclass(frozen=True)
class Table:
    """What to_table wrote: `name` the table as SQL text (quoted, schema-qualified when it was given so),
    `rows` the rows written, `columns` each column's SQL type as sent, and `features` and `label` the
    columns to give pgdl.pack (SQL text, quoted), when to_table was told them."""
    name: str
    rows: int
    columns: dict
    features: Optional[str] = None
    label: Optional[str] = None

    @property
    def relation(self):
        return self.name


@dataclass(frozen=True)
class Dataset:
    """A packed table's row of pgdl.datasets (see docs/reference/pack.md#pgdldatasets)."""
    id: int
    packed: str
    source: str
    features: str
    label: str
    task: str
    n_rows: int
    n_features: int
    n_targets: int
    classes: Optional[list]
    label_type: str
    n_buffers: int
    buffer_rows: int
    partitions: int
    normalization: dict
    weighted: bool

    @property
    def relation(self):
        return self.packed


def to_table(conn, df, table, *, features=None, label=None, if_exists="fail"):
    """Write a DataFrame's rows into a table by binary COPY; returns a Table.

    `table`: a name with SQL's rules ("s.t", 's."My Table"': unquoted parts fold to lower case), or a tuple
    (schema, name) or (name,) taken as it is. Column types follow the dtypes (see docs/reference/python.md);
    NaN, None, NA and NaT become NULL, a NaN inside an array a NULL element. The index is not written.
    `features` (a column or a list of them) and `label` are only checked and quoted for pack.
    `if_exists`: "fail" (the server's error), "replace" (drop it first) or "append" (insert, the server
    casting to the table's column types; the table is created when missing). One transaction.
    """
    if if_exists not in _IF_EXISTS:
        raise ValueError(f"if_exists must be one of {', '.join(_IF_EXISTS)}, not {if_exists!r}")
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"to_table takes a pandas DataFrame, not {type(df).__name__}")
    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise ValueError(f"the DataFrame's column names repeat: {names}")
    features_sql, label_sql = _pack_columns(conn, names, features, label)
    columns = [(name, *_column(name, df.iloc[:, i])) for i, name in enumerate(names)]
    target = sql.Identifier(*_name_parts(conn, table))
    with conn.transaction(), cursor(conn) as cur:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", [target.as_string(conn)])
        exists = cur.fetchone()[0]
        if exists and if_exists == "replace":
            cur.execute(sql.SQL("DROP TABLE {}").format(target))
        if exists and if_exists == "append":
            rows = _append(cur, target, columns)
        else:
            cur.execute(sql.SQL("CREATE TABLE {} ({})").format(target, _definitions(columns)))
            rows = _copy(cur, target, columns)
    return Table(target.as_string(conn), rows, {name: typ for name, typ, _ in columns}, features_sql, label_sql)


def _pack_columns(conn, names, features, label):
    """features and label as pack takes them: quoted, comma-separated; each must be a column."""
    quoted = []
    wanted = [] if features is None else [features] if isinstance(features, str) else list(features)
    for column in wanted + ([] if label is None else [label]):
        if str(column) not in names:
            raise KeyError(f"column {column!r} is not in the DataFrame")
        quoted.append(sql.Identifier(str(column)).as_string(conn))
    features_sql = ", ".join(quoted[:len(wanted)]) if features is not None else None
    return features_sql, quoted[-1] if label is not None else None


def _name_parts(conn, table):
    if isinstance(table, tuple):
        parts = tuple(str(p) for p in table)
    else:
        with cursor(conn, binary=False) as cur:
            cur.execute("SELECT parse_ident(%s::text)", [table])
            parts = tuple(cur.fetchone()[0])
    if not 1 <= len(parts) <= 2:
        raise ValueError(f"a table is a name or a schema and a name, not {table!r}")
    return parts


def _definitions(columns):
    return sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(name), sql.SQL(typ))
                              for name, typ, _ in columns)


def _copy(cur, target, columns):
    if not columns:
        return 0
    names = sql.SQL(", ").join(sql.Identifier(name) for name, _, _ in columns)
    with cur.copy(sql.SQL("COPY {} ({}) FROM STDIN (FORMAT binary)").format(target, names)) as copy:
        copy.set_types([typ for _, typ, _ in columns])
        for row in zip(*(values for _, _, values in columns)):
            copy.write_row(row)
    return cur.rowcount


def _append(cur, target, columns):
    """COPY into a temporary table of the DataFrame's types, then INSERT: the server casts each column."""
    scratch = sql.Identifier("pg_temp", f"pgdl_client_{uuid.uuid4().hex}")
    cur.execute(sql.SQL("CREATE TEMPORARY TABLE {} ({})").format(scratch, _definitions(columns)))
    _copy(cur, scratch, columns)
    names = sql.SQL(", ").join(sql.Identifier(name) for name, _, _ in columns)
    cur.execute(sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {}").format(target, names, names, scratch))
    rows = cur.rowcount
    cur.execute(sql.SQL("DROP TABLE {}").format(scratch))
    return rows


def _column(name, s):
    """(SQL type, values with None for NULL) of one column, from its dtype."""
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return "text", [None if _missing(v) else str(v) for v in s]
    if ptypes.is_bool_dtype(dtype):
        return "boolean", _scalars(s, np.bool_, False)
    if ptypes.is_integer_dtype(dtype):
        np_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype))
        if np_dtype == np.uint64:
            return "numeric", [None if v is None else decimal.Decimal(v) for v in _scalars(s, np_dtype, 0)]
        small = np_dtype.itemsize < 4 or (np_dtype.itemsize == 4 and np_dtype.kind == "i")
        return "integer" if small else "bigint", _scalars(s, np_dtype, 0)
    if ptypes.is_float_dtype(dtype):
        np_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype))
        return "real" if np_dtype.itemsize <= 4 else "double precision", _scalars(s, np.float64, np.nan)
    if ptypes.is_datetime64_any_dtype(dtype):
        zoned = getattr(dtype, "tz", None) is not None
        return "timestamptz" if zoned else "timestamp", [None if _missing(v) else v.to_pydatetime() for v in s]
    if dtype == object or ptypes.is_string_dtype(dtype):
        return _object_column(name, s)
    raise TypeError(f"column {name!r} of dtype {dtype} has no SQL type: convert it first")


def _scalars(s, np_dtype, fill):
    values = s.to_numpy(dtype=np_dtype, na_value=fill).tolist()
    for i in np.flatnonzero(s.isna().to_numpy()):
        values[i] = None
    return values


_KINDS = ((bool, "boolean"), (np.bool_, "boolean"), (str, "text"), (int, "bigint"), (np.integer, "bigint"),
          (float, "double precision"), (np.floating, "double precision"), (np.ndarray, "real[]"),
          (list, "real[]"), (tuple, "real[]"), (bytes, "bytea"), (bytearray, "bytea"))


def _object_column(name, s):
    """An object column's type from its values: all of one kind (ints and floats: double precision)."""
    kinds = set()
    for v in s:
        if not _missing(v):
            kind = next((k for t, k in _KINDS if isinstance(v, t)), None)
            if kind is None:
                raise TypeError(f"column {name!r} holds a {type(v).__name__}, which has no SQL type here")
            kinds.add(kind)
    if kinds == {"bigint", "double precision"}:
        kinds = {"double precision"}
    if len(kinds) > 1:
        raise TypeError(f"column {name!r} mixes values of types {', '.join(sorted(kinds))}")
    kind = kinds.pop() if kinds else "text"
    if kind == "real[]":
        return kind, [None if _missing(v) else _array(name, i, v) for i, v in enumerate(s)]
    convert = {"boolean": bool, "bigint": int, "double precision": float}.get(kind, lambda v: v)
    return kind, [None if _missing(v) else convert(v) for v in s]


def _array(name, row, v):
    """A value of an array column as float32, its NaNs (and a masked array's masked elements) masked."""
    mask = np.ma.getmaskarray(v) if np.ma.isMaskedArray(v) else False
    try:
        a = np.ma.filled(v, np.nan) if np.ma.isMaskedArray(v) else np.asarray(v)
        a = as_float32(np.asarray(a, dtype=np.float64) if a.dtype == object else a)
    except (TypeError, ValueError) as e:
        raise type(e)(f"column {name!r}, row {row}: {e}") from e
    mask = mask | np.isnan(a)
    return np.ma.MaskedArray(a, mask=mask) if np.any(mask) else a


def _missing(v):
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    return isinstance(v, (float, np.floating)) and math.isnan(v)


def pack(conn, source, packed, features=None, label=None, **options):
    """pgdl.pack a table (a name, or a Table from to_table) into `packed`; returns its Dataset.

    `features` and `label` default to a Table's. `options`: pack's other arguments by their SQL names
    (buffer_rows, partitions, seed, scale, standardize, nulls, reference (a name or a Dataset), ...);
    None leaves the function's default.
    """
    features = features if features is not None else getattr(source, "features", None)
    label = label if label is not None else getattr(source, "label", None)
    if features is None or label is None:
        raise TypeError("pack needs features and label (a Table from to_table may carry them)")
    if "reference" in options:
        options["reference"] = relation(options["reference"])
    text, params = call("pack", [("%s::regclass", relation(source)), ("%s::text", features),
                                 ("%s::text", label), ("%s::text", packed)], options)
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT {}").format(text), params)
        return dataset(conn, cur.fetchone()[0])


def dataset(conn, packed):
    """The Dataset of a packed table: its id (int), its name or a Table. LookupError if none is seen."""
    by_id = isinstance(packed, (int, np.integer)) and not isinstance(packed, (bool, np.bool_))
    where = "id = %s::bigint" if by_id else "packed = %s::regclass"
    with cursor(conn, binary=False) as cur:		# text: regclass and regtype as their names
        cur.execute("SELECT id, packed::text, source, features, label, task, n_rows, n_features, n_targets, "
                    "classes, label_type::text, n_buffers, buffer_rows, partitions, normalization, weighted "
                    f"FROM pgdl.datasets WHERE {where}", [int(packed) if by_id else relation(packed)])
        row = cur.fetchone()
    if row is None:
        raise LookupError(f"{packed!r} is not a packed table the caller may see")
    return Dataset(*row)
