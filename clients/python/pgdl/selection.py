"""Configuration sets for pgdl.fit_multiple: pgdl.grid_search and pgdl.random_search, and a set's rows."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
from psycopg import sql

from ._sql import call, cursor, frame, json_arg


@dataclass(frozen=True)
class ConfigSet:
    """A configuration set: its name (what fit_multiple takes; a ConfigSet is taken too), how many
    configurations the call added (those already in the set are not added twice), and the set's rows."""
    name: str
    added: int
    configs: pd.DataFrame = field(repr=False, compare=False)


def grid_search(conn, set_name, architectures, params):
    """pgdl.grid_search: every combination of `params` (a dict: a list is tried, a scalar fixed) for each
    architecture (a stored architecture's name, or a list of them) into the set `set_name`."""
    return _search(conn, "grid_search", set_name, architectures, [("%s::jsonb", json_arg(params))], {})


def random_search(conn, set_name, architectures, space, n, seed=None):
    """pgdl.random_search: `n` samples of a search space (a dict; see docs/reference/configs.md), each with an
    architecture drawn from the list; the same seed, the same samples."""
    return _search(conn, "random_search", set_name, architectures,
                   [("%s::jsonb", json_arg(space)), ("%s::integer", n)], {"seed": seed})


def _search(conn, function, set_name, architectures, rest, named):
    names = [architectures] if isinstance(architectures, str) else list(architectures)
    text, params = call(function, [("%s::text", set_name), ("%s::text[]", names)] + rest, named)
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT {}").format(text), params)
        added = cur.fetchone()[0]
    return ConfigSet(set_name, added, configs(conn, set_name))


def configs(conn, set_name):
    """The rows of a configuration set: id, architecture (its name), config (a dict). As fit_multiple reads
    a set name: the caller's own set, else the one of that name the caller may use."""
    with cursor(conn) as cur:
        cur.execute("WITH s AS (SELECT c.*, c.owner::oid = (SELECT oid FROM pg_roles WHERE rolname = current_user) "
                    "AS mine FROM pgdl.configs c WHERE c.set_name = %s) "
                    "SELECT s.id, a.name AS architecture, s.config FROM s "
                    "LEFT JOIN pgdl.architectures a ON a.id = s.architecture "
                    "WHERE s.mine OR NOT EXISTS (SELECT 1 FROM s WHERE s.mine) ORDER BY s.id", [set_name])
        return frame(cur)
