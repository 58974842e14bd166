"""Explanations: a row's attributions (pgdl.explain, integrated gradients) drawn over its image, and a
table's permutation importances (pgdl.feature_importance)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from psycopg import sql

from ._sql import call, cursor, frame, model_arg, relation
from .tables import Table


@dataclass(frozen=True, eq=False)
class Explanation:
    """pgdl.explain of one example: `frame` its rows (feature, name, value, attribution), `attributions`
    and `values` as float64 ndarrays shaped as the x that was given."""
    model: object
    target_class: Optional[str]
    frame: pd.DataFrame = field(repr=False)
    attributions: np.ndarray = field(repr=False)
    values: np.ndarray = field(repr=False)


def explain(conn, model, x, target_class=None, baseline=None, steps=None):
    """pgdl.explain: each feature's integrated-gradients attribution to the model's output for `x`.

    `x` and `baseline` go flattened in C order as double precision[]; `target_class` is a label (sent as
    text; None: the function's default) and `steps` the integration's steps (None: its default, 64).
    Returns an Explanation.
    """
    shape = np.shape(x)
    named = {"target_class": None if target_class is None else str(target_class),
             "baseline": None if baseline is None else _doubles(baseline), "steps": steps}
    text, params = call("explain", [model_arg(model), ("%s::double precision[]", _doubles(x))], named)
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT feature, name, value, attribution FROM {} ORDER BY feature").format(text),
                    params)
        rows = frame(cur)
    attributions = rows["attribution"].to_numpy(dtype=np.float64, na_value=np.nan)
    values = rows["value"].to_numpy(dtype=np.float64, na_value=np.nan)
    if attributions.size == int(np.prod(shape)):
        attributions, values = attributions.reshape(shape), values.reshape(shape)
    return Explanation(model, named["target_class"], rows, attributions, values)


def _doubles(x):
    a = np.ma.filled(np.ma.asarray(x, dtype=np.float64), np.nan) if np.ma.isMaskedArray(x) else np.asarray(x)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"an example is an array of real numbers, not of dtype {a.dtype}")
    return a.astype(np.float64).reshape(-1).tolist()


def feature_importance(conn, model, source, features=None, label=None, metric=None, repeats=None, seed=None):
    """pgdl.feature_importance: how much `metric` (None: the function's default) worsens when each feature
    is shuffled over the rows of a table, view or query (or a Table, which brings its features and label),
    `repeats` times (None: 5) from `seed` (None: 0). A DataFrame of feature, name, importance,
    importance_std, in the function's order."""
    if isinstance(source, Table):
        features = features if features is not None else source.features
        label = label if label is not None else source.label
    if features is None or label is None:
        raise TypeError("feature_importance needs the rows' features and label columns")
    text, params = call("feature_importance", [model_arg(model), ("%s::text", relation(source)),
                                               ("%s::text", features), ("%s::text", label)],
                        {"metric": metric, "repeats": repeats, "seed": seed})
    with cursor(conn) as cur:
        cur.execute(sql.SQL("SELECT feature, name, importance, importance_std FROM {}").format(text), params)
        return frame(cur)


def plot_attributions(explanation, image=None, shape=(28, 28), ax=None, *, cmap="RdBu_r", alpha=0.6,
                      colorbar=True):
    """Draw an image in grey and its attribution map over it; returns the matplotlib Axes.

    `explanation`: an Explanation (its values are the image unless `image` is given) or an array of
    attributions. `shape`: (height, width), or (channels, height, width) with 1 or 3 channels, whose
    attributions are summed per pixel; an array already of two dimensions keeps its own. The map's colours
    are symmetric about 0 (red adds to the class, blue takes away). Without `ax`, a new Figure on the Agg
    canvas (no pyplot): ax.figure.savefig(path) writes it. Over an image a pixel's map is as opaque as its
    attribution is large, up to `alpha` for the largest.
    """
    if isinstance(explanation, Explanation):
        attributions = explanation.attributions
        image = explanation.values if image is None else image
    else:
        attributions = np.asarray(explanation, dtype=np.float64)
    shape = tuple(attributions.shape) if attributions.ndim == 2 else tuple(shape)
    heat = _pixels(attributions, shape, "attributions")
    if heat.ndim == 3:
        heat = heat.sum(axis=0)
    if ax is None:
        fig = Figure(figsize=(4.2 if colorbar else 3.4, 3.4), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.subplots()
    if image is not None:
        _draw_image(ax, _pixels(np.asarray(image, dtype=np.float64), shape, "image"))
    limit = float(np.nanmax(np.abs(heat))) if np.isfinite(heat).any() else 0.0
    limit = limit if limit > 0 else 1.0
    # over an image, each pixel's opacity grows with its attribution, so that the image shows where there is none
    opacity = alpha * np.sqrt(np.clip(np.nan_to_num(np.abs(heat)) / limit, 0, 1)) if image is not None else None
    drawn = ax.imshow(heat, cmap=cmap, vmin=-limit, vmax=limit, alpha=opacity, interpolation="nearest")
    if colorbar:
        ax.figure.colorbar(drawn, ax=ax, fraction=0.046, pad=0.04, label="attribution")
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def _pixels(a, shape, what):
    if a.size != int(np.prod(shape)):
        raise ValueError(f"{what} of {a.size} values do not fill shape {shape}")
    if len(shape) == 3 and shape[0] not in (1, 3):
        raise ValueError(f"shape {shape}: an image has 1 or 3 channels, first")
    a = a.reshape(shape)
    return a[0] if a.ndim == 3 and a.shape[0] == 1 else a


def _draw_image(ax, pixels):
    if pixels.ndim == 3:				# channels first, scaled into 0..1 for imshow
        low, high = np.nanmin(pixels), np.nanmax(pixels)
        rgb = (pixels - low) / (high - low) if high > low else np.zeros_like(pixels)
        ax.imshow(np.moveaxis(rgb, 0, -1), interpolation="nearest")
    else:
        ax.imshow(pixels, cmap="gray", interpolation="nearest")


def plot_feature_importance(importances, top=20, ax=None):
    """A horizontal bar per feature of a feature_importance DataFrame, the most important on top, with its
    spread over the repeats as error bars; the `top` features (None: all). Returns the Axes."""
    rows = importances.sort_values("importance", ascending=False)
    rows = rows if top is None else rows.head(top)
    labels = [n if isinstance(n, str) and n else f"feature {f}" for f, n in zip(rows["feature"], rows["name"])]
    if ax is None:
        fig = Figure(figsize=(6, 0.3 * len(rows) + 1.2), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.subplots()
    positions = np.arange(len(rows))[::-1]
    ax.barh(positions, rows["importance"], xerr=rows["importance_std"].fillna(0), color="tab:blue",
            error_kw={"elinewidth": 1, "capsize": 2})
    ax.set_yticks(positions, labels)
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("importance (the metric's loss when shuffled)")
    return ax
