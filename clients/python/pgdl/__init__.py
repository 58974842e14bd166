"""pgdl from Python: numpy arrays in and out, training with a progress bar, metrics and scores as DataFrames.

    import psycopg, pgdl
    conn = psycopg.connect(autocommit=True)
    pgdl.register(conn)                      # ndarrays in as real[], real[] out as float32 ndarrays
    model = pgdl.fit(conn, "train_packed", "mlp", {"lr": 0.05}, epochs=5)
    pgdl.predict_class(conn, model, x)       # an int for an integer label column
"""
from .adapt import Float32ArrayBinaryLoader, Float32ArrayDumper, Float32ArrayTextLoader, as_float32, register
from .inference import (Predictions, export_onnx, import_onnx, label_converter, model_from_weights, model_weights,
                        predict, predict_batch, predict_class)
from .metrics import confusion_matrix, metrics, plot_training_curves, run_metrics
from .training import fit, fit_multiple, progress_done

__version__ = "0.7.0"

__all__ = [
    "register", "as_float32", "Float32ArrayDumper", "Float32ArrayBinaryLoader", "Float32ArrayTextLoader",
    "model_weights", "model_from_weights", "export_onnx", "import_onnx", "predict", "predict_class",
    "predict_batch", "Predictions",
    "label_converter", "fit", "fit_multiple", "progress_done", "run_metrics", "plot_training_curves",
    "metrics", "confusion_matrix",
]
