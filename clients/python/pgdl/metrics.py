"""A run's per-epoch metrics and a model's scores (pgdl.metrics, pgdl.confusion_matrix) as pandas
DataFrames, a model's loss and accuracy (pgdl.evaluate) as an Evaluation, and its training curves as a
matplotlib figure."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from psycopg import sql

from ._sql import call, cursor, model_arg, relation
from .tables import Table


def run_metrics(conn, run):
    """pgdl.run_metrics of one run: a row per model (config) and epoch, in that order.

    Raises LookupError for a run that does not exist or that the caller may not see.
    """
    with cursor(conn, binary=False) as cur:	# text: owner (regrole) as its name
        cur.execute("SELECT 1 FROM pgdl.runs WHERE id = %s", [run])
        if cur.fetchone() is None:
            raise LookupError(f"run {run} does not exist")
        cur.execute("SELECT * FROM pgdl.run_metrics WHERE run = %s "
                    "ORDER BY config NULLS FIRST, node NULLS FIRST, epoch", [run])
        columns = [c.name for c in cur.description]
        return pd.DataFrame(cur.fetchall(), columns=columns)


def _data_args(data, features, label):
    """A packed table (features and label None) or raw rows: a table, view or query and its columns (a
    Table from to_table brings its own)."""
    if isinstance(data, Table) and features is None and label is None:
        features, label = data.features, data.label
    if (features is None) != (label is None):
        raise TypeError("raw rows need both features and label; a packed table takes neither")
    if features is None:
        return [("%s::regclass", relation(data))]
    return [("%s::text", relation(data)), ("%s::text", features), ("%s::text", label)]


def _rows(conn, function, model, data, features, label, named):
    text, params = call(function, [model_arg(model)] + _data_args(data, features, label), named)
    with cursor(conn, binary=False) as cur:
        cur.execute(sql.SQL("SELECT * FROM {}").format(text), params)
        return pd.DataFrame(cur.fetchall(), columns=[c.name for c in cur.description])


@dataclass(frozen=True)
class Evaluation:
    """pgdl.evaluate's row: the mean loss, the accuracy (None for a regression's mse) and the rows read."""
    loss: Optional[float]
    accuracy: Optional[float]
    n: int


def evaluate(conn, model, data, features=None, label=None):
    """pgdl.evaluate of a model over a packed table (a name or a Dataset), or with `features` and `label`
    over the raw rows of a table, view or query (or a Table), preprocessed as its training set was packed."""
    text, params = call("evaluate", [model_arg(model)] + _data_args(data, features, label), {})
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT loss, accuracy, n FROM {}").format(text), params)
        return Evaluation(*cur.fetchone())


def metrics(conn, model, data, features=None, label=None, *, top_k=None):
    """pgdl.metrics: scikit-learn's metrics of a model, a row per (metric, class, average).

    `data` is a packed table, or with `features` and `label` a table, view or query whose raw rows pgdl
    preprocesses as the model's training set was packed. Columns: metric, class, average, value.
    """
    return _rows(conn, "metrics", model, data, features, label, {"top_k": top_k})


def confusion_matrix(conn, model, data, features=None, label=None, *, weighted=False):
    """pgdl.confusion_matrix as a DataFrame: actual classes as rows, predicted ones as columns.

    The cells count rows, or with weighted=True sum their weights (a table packed with weight => ...).
    """
    df = _rows(conn, "confusion_matrix", model, data, features, label, {})
    order = list(dict.fromkeys(df["actual"]))
    values = "weight" if weighted else "count"
    return df.pivot(index="actual", columns="predicted", values=values).reindex(index=order, columns=order)


def plot_training_curves(df, title=None):
    """Loss (and accuracy, when there is any) per epoch: a line per model of the run.

    Training is solid, validation dashed. Returns a matplotlib Figure on the Agg canvas (no pyplot,
    no display needed): fig.savefig("curves.png"), or let a notebook show it.
    """
    has_accuracy = df["train_accuracy"].notna().any() or df["validation_accuracy"].notna().any()
    fig = Figure(figsize=(10 if has_accuracy else 5.5, 4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2 if has_accuracy else 1, squeeze=False)[0]
    panels = [("loss", axes[0])] + ([("accuracy", axes[1])] if has_accuracy else [])
    for key, frame in _per_model(df):
        for metric, ax in panels:
            for split, style in (("train", "-"), ("validation", "--")):
                values = frame[f"{split}_{metric}"]
                if values.notna().any():
                    ax.plot(frame["epoch"], values, style, marker="o", markersize=3,
                            label=f"{key}{split}".strip())
    for metric, ax in panels:
        ax.set_xlabel("epoch")
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


def _per_model(df):
    """(label, rows by epoch) for each model of the frame: one unlabelled model for a pgdl.fit run."""
    group = [c for c in ("config", "node") if c in df and df[c].notna().any()]
    if not group:
        yield "", df.sort_values("epoch")
        return
    for key, frame in df.groupby(group if len(group) > 1 else group[0], dropna=False, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        label = " ".join(f"{c} {k}" for c, k in zip(group, key) if not pd.isna(k))
        yield label + " ", frame.sort_values("epoch")
