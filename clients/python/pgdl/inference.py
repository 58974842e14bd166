"""Weights as named ndarrays, and predictions with labels in the type they were packed from."""
import uuid
from collections import namedtuple

import numpy as np
from psycopg import sql

from ._sql import call, cursor, json_arg, model_arg

_INTEGER_TYPES = {"smallint", "integer", "bigint"}
_BUFFERS = ("running_mean", "running_var")
_CHUNK_VALUES = 1 << 22		# floats per INSERT in predict_batch: 16 MB statements

Predictions = namedtuple("Predictions", "labels probabilities")


def model_weights(conn, model):
    """Every parameter tensor of a model, as pgdl.model_weights gives them.

    Returns a dict from PyTorch's state_dict key (`"<layer>.<name>"`, e.g. `"0.weight"`) to a float32
    ndarray of the tensor's shape, in state_dict order.
    """
    placeholder, value = model_arg(model)
    query = sql.SQL('SELECT layer, name, shape, "values" FROM pgdl.model_weights({}) WITH ORDINALITY '
                    "ORDER BY ordinality").format(placeholder)
    with cursor(conn) as cur:
        cur.execute(query, [value])
        return {f"{layer}.{name}": values.reshape(shape) for layer, name, shape, values in cur}


def model_from_weights(conn, spec, weights, seed=None):
    """A model blob (bytes) from a spec and its tensors, through pgdl.model_from_weights.

    `weights`: a mapping in state_dict order (what model_weights returns, or a PyTorch state_dict of a
    network with the same layers; `num_batches_tracked` is ignored), or a sequence of arrays.
    """
    items = weights.items() if hasattr(weights, "items") else enumerate(weights)
    params, buffers = [], []
    for key, tensor in items:
        key = str(key)
        if key.endswith("num_batches_tracked"):
            continue
        (buffers if key.endswith(_BUFFERS) else params).append(np.asarray(tensor, dtype=np.float32).reshape(-1))
    named = {"buffers": np.concatenate(buffers) if buffers else None, "seed": seed}
    text, values = call("model_from_weights", [("%s::jsonb", json_arg(spec)), ("%s", _concat(params))], named)
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT {}").format(text), values)
        return cur.fetchone()[0]


def export_onnx(conn, model, path=None, with_normalization=None):
    """The model as an ONNX file's bytes, through pgdl.export_onnx; written to `path` too when given.

    `with_normalization` (default: the function's, true) folds a stored model's dataset normalization in.
    """
    placeholder, value = model_arg(model)
    text, values = call("export_onnx", [(placeholder, value)], {"with_normalization": with_normalization})
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT {}").format(text), values)
        data = cur.fetchone()[0]
    if path is not None and data is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data


def import_onnx(conn, name, onnx, dataset=None, loss=None):
    """A new stored model (its id) from ONNX bytes or the path of a .onnx file, through pgdl.import_onnx."""
    if isinstance(onnx, str) or hasattr(onnx, "__fspath__"):
        with open(onnx, "rb") as f:
            onnx = f.read()
    text, values = call("import_onnx", [("%s::text", name), ("%s::bytea", onnx)],
                        {"dataset": dataset, "loss": loss})
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT {}").format(text), values)
        return cur.fetchone()[0]


def predict(conn, model, x):
    """The network's outputs (float32 ndarray) for one example `x` (flattened in C order)."""
    placeholder, value = model_arg(model)
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT pgdl.predict({}, %s)").format(placeholder), [value, x])
        return cur.fetchone()[0]


def predict_class(conn, model, x):
    """The most likely class of one example, in the type of the label it was packed from.

    An integer label column gives an int, a text one a str; a blob (which has no dataset) or a stored
    model without one gives its class index as an int.
    """
    placeholder, value = model_arg(model)
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT pgdl.predict_class({}, %s)").format(placeholder), [value, x])
        label = cur.fetchone()[0]
    return None if label is None else label_converter(conn, model)(label)


def predict_batch(conn, model, X, batch_size=None):
    """Classes and their probabilities for every example of X (its first axis), by pgdl.predict_batch.

    The examples go into a temporary table (dropped before returning) that pgdl.predict_batch reads
    `batch_size` rows per forward pass. Returns Predictions(labels, probabilities): a list of labels
    typed as in predict_class and a float32 ndarray, in the order of X.
    """
    X = np.asarray(X)
    if X.ndim < 2:
        raise ValueError("X must hold examples along its first axis (for one example, use predict_class)")
    n, features = X.shape[0], int(np.prod(X.shape[1:]))
    table = f"pgdl_client_{uuid.uuid4().hex}"
    placeholder, value = model_arg(model)
    text, params = call("predict_batch", [(placeholder, value), ("%s::regclass", f"pg_temp.{table}"),
                                           ("%s", "id"), ("%s", "x")], {"batch_size": batch_size})
    with conn.transaction(), cursor(conn) as cur:
        cur.execute(sql.SQL("CREATE TEMPORARY TABLE {} (id bigint, x real[])").format(sql.Identifier(table)))
        examples = X.reshape(n, features)
        per_insert = max(1, _CHUNK_VALUES // max(1, features))
        for start in range(0, n, per_insert):
            chunk = examples[start:start + per_insert]
            cur.execute(sql.SQL("INSERT INTO {} SELECT %s + g, (%s::real[])[g * %s + 1 : (g + 1) * %s] "
                                "FROM generate_series(0, %s - 1) g").format(sql.Identifier(table)),
                        [start, chunk, features, features, len(chunk)])
        cur.execute(sql.SQL("SELECT class, probability FROM {} ORDER BY id").format(text), params)
        rows = cur.fetchall()
        cur.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))
    convert = label_converter(conn, model)
    return Predictions([None if c is None else convert(c) for c, _ in rows],
                       np.array([np.nan if p is None else p for _, p in rows], dtype=np.float32))


def label_converter(conn, model):
    """A function from pgdl's text label to the label's own type for this model (see predict_class)."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return int
    placeholder, value = model_arg(model)
    model_id = sql.SQL("pgdl.model_id({})").format(placeholder) if isinstance(model, str) else placeholder
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT m.dataset IS NULL, d.label_type::text FROM pgdl.models m "
                            "LEFT JOIN pgdl.datasets d ON d.id = m.dataset WHERE m.id = {}").format(model_id),
                    [value])
        row = cur.fetchone()
    if row is None:
        return str
    no_dataset, label_type = row
    return int if no_dataset or label_type in _INTEGER_TYPES else str


def _concat(arrays):
    return np.concatenate(arrays) if arrays else np.empty(0, dtype=np.float32)
