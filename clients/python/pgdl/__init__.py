"""pgdl from Python: numpy arrays in and out, DataFrames into tables, training with a progress bar, metrics and
scores as DataFrames, deployments and explanations.

    import psycopg, pgdl
    conn = psycopg.connect(autocommit=True)
    pgdl.register(conn)                      # ndarrays in as real[], real[] out as float32 ndarrays
    table = pgdl.to_table(conn, df, "points", features=["a", "b"], label="y")
    data = pgdl.pack(conn, table, "points_packed", partitions=2)
    model = pgdl.fit(conn, data, "mlp", {"lr": 0.05}, epochs=5)
    pgdl.predict_class(conn, model, x)       # an int for an integer label column
"""
from .adapt import Float32ArrayBinaryLoader, Float32ArrayDumper, Float32ArrayTextLoader, as_float32, register
from .deployments import Deployment, deploy, deployments, drop_deployment, grant_deployment, revoke_deployment, \
    rollback
from .explain import Explanation, explain, feature_importance, plot_attributions, plot_feature_importance
from .inference import (Predictions, export_onnx, import_onnx, label_converter, model_from_weights, model_weights,
                        predict, predict_batch, predict_class)
from .metrics import Evaluation, confusion_matrix, evaluate, metrics, plot_training_curves, run_metrics
from .selection import ConfigSet, configs, grid_search, random_search
from .tables import Dataset, Table, dataset, pack, to_table
from .training import Selection, fit, fit_multiple, progress_done

__version__ = "0.7.0"

__all__ = [
    "register", "as_float32", "Float32ArrayDumper", "Float32ArrayBinaryLoader", "Float32ArrayTextLoader",
    "to_table", "Table", "pack", "dataset", "Dataset",
    "model_weights", "model_from_weights", "export_onnx", "import_onnx", "predict", "predict_class",
    "predict_batch", "Predictions",
    "label_converter", "fit", "fit_multiple", "Selection", "progress_done", "grid_search", "random_search",
    "configs", "ConfigSet", "run_metrics", "plot_training_curves",
    "evaluate", "Evaluation", "metrics", "confusion_matrix",
    "deploy", "rollback", "drop_deployment", "grant_deployment", "revoke_deployment", "deployments", "Deployment",
    "explain", "Explanation", "feature_importance", "plot_attributions", "plot_feature_importance",
]
