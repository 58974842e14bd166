"""A run's per-epoch metrics as a pandas DataFrame, and its training curves as a matplotlib figure."""
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ._sql import cursor


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
