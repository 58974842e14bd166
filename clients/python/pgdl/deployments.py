"""Deployments: a name that answers predict with a model, with its history (pgdl.deploy, pgdl.rollback and the
view pgdl.deployments)."""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Optional

import numpy as np
from psycopg import sql

from ._sql import cursor, frame

_COLUMNS = ("name, owner, version, model, model_name, deployed_by, deployed_at, rolled_back_by, rolled_back_at, "
            "active, metrics")


@dataclass(frozen=True)
class Deployment:
    """A row of pgdl.deployments: one deployment of a name (roles as their names)."""
    name: str
    owner: Optional[str]
    version: Optional[int]
    model: int
    model_name: Optional[str]
    deployed_by: Optional[str]
    deployed_at: Optional[datetime.datetime]
    rolled_back_by: Optional[str]
    rolled_back_at: Optional[datetime.datetime]
    active: Optional[bool]
    metrics: Optional[dict]


def deploy(conn, name, model):
    """pgdl.deploy: `model` (a stored model's id or name) answers under `name` from now on; returns the
    Deployment now active."""
    if isinstance(model, (bool, np.bool_)) or not isinstance(model, (int, np.integer, str)):
        raise TypeError(f"a deployment is of a stored model, an id (int) or a name (str), not {type(model).__name__}")
    typ = "text" if isinstance(model, str) else "bigint"
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT pgdl.deploy(%s::text, %s::{})").format(sql.SQL(typ)),
                    [name, model if isinstance(model, str) else int(model)])
        return _current(conn, name, cur.fetchone()[0])


def rollback(conn, name):
    """pgdl.rollback: the name goes back to the model it answered with before; returns that Deployment."""
    with cursor(conn) as cur:
        cur.execute("SELECT pgdl.rollback(%s::text)", [name])
        return _current(conn, name, cur.fetchone()[0])


def drop_deployment(conn, name):
    """pgdl.drop_deployment: the name and its history go (the models stay)."""
    conn.execute("SELECT pgdl.drop_deployment(%s::text)", [name])


def grant_deployment(conn, name, role):
    """pgdl.grant_deployment: `role` may predict with the name."""
    conn.execute("SELECT pgdl.grant_deployment(%s::text, %s::text)", [name, role])


def revoke_deployment(conn, name, role):
    """pgdl.revoke_deployment: the reverse of grant_deployment."""
    conn.execute("SELECT pgdl.revoke_deployment(%s::text, %s::text)", [name, role])


def deployments(conn, name=None):
    """pgdl.deployments as a DataFrame, every name's history (or one name's), by name and version."""
    where = "WHERE name = %s" if name is not None else ""
    with cursor(conn, binary=False) as cur:		# text: regrole as names
        cur.execute(f"SELECT {_COLUMNS} FROM pgdl.deployments {where} ORDER BY name, owner::text, version",
                    [] if name is None else [name])
        return frame(cur)


def _current(conn, name, model):
    """The active row of `name` that deploys `model`; a bare Deployment when the view shows none."""
    with cursor(conn, binary=False) as cur:
        cur.execute(f"SELECT {_COLUMNS} FROM pgdl.deployments WHERE name = %s AND active "
                    "ORDER BY model = %s DESC, version DESC LIMIT 1", [name, model])
        row = cur.fetchone()
    if row is None:
        return Deployment(name, None, None, model, None, None, None, None, None, None, None)
    return Deployment(*row)
