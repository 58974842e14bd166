"""Building calls to pgdl's SQL functions: every value a bound parameter, every name an identifier."""
from collections.abc import Mapping

import numpy as np
import pandas as pd
from psycopg import sql
from psycopg.types.json import Jsonb

from .adapt import register


def model_arg(model):
    """The placeholder and value that name a model: an id (bigint), a name (text) or a blob (bytea)."""
    if isinstance(model, (bool, np.bool_)):
        raise TypeError("a model is an id (int), a name (str) or a blob (bytes), not a bool")
    if isinstance(model, (int, np.integer)):
        return sql.SQL("{}::bigint").format(sql.Placeholder()), int(model)
    if isinstance(model, str):
        return sql.SQL("{}::text").format(sql.Placeholder()), model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return sql.SQL("{}::bytea").format(sql.Placeholder()), bytes(model)
    raise TypeError(f"a model is an id (int), a name (str) or a blob (bytes), not {type(model).__name__}")


def json_arg(value):
    """A jsonb value: a mapping or a list as Jsonb; a string is taken as JSON text."""
    if value is None or isinstance(value, str):
        return value
    return Jsonb(value)


def call(function, positional, named):
    """SELECT-able `pgdl.function(p1, p2, ..., key => v, ...)` and its parameters.

    `positional`: (placeholder, value) pairs, the placeholder as SQL or str (`"%s::jsonb"`).
    `named`: SQL argument names to values; a value of None is left out, so that the function's default
    applies.
    """
    args = [sql.SQL(p) if isinstance(p, str) else p for p, _ in positional]
    params = [value for _, value in positional]
    for key, value in named.items():
        if value is None:
            continue
        args.append(sql.SQL("{} => {}").format(sql.Identifier(key), sql.Placeholder()))
        params.append(json_arg(value) if isinstance(value, Mapping) else value)
    text = sql.SQL("pgdl.{}({})").format(sql.Identifier(function), sql.SQL(", ").join(args))
    return text, params


def cursor(conn, binary=True):
    """A cursor with the numpy adapters, whatever the connection has registered."""
    cur = conn.cursor(binary=binary)
    register(cur)
    return cur


def relation(obj):
    """The SQL name of a table: a Table's or a Dataset's own (its `relation`), or obj as it is."""
    return getattr(obj, "relation", obj)


def frame(cur):
    """The rows of an executed cursor as a DataFrame with its column names."""
    return pd.DataFrame(cur.fetchall(), columns=[c.name for c in cur.description])
