#!/usr/bin/python3
"""pgdl's metrics against scikit-learn's, on pgdl's own predictions.

scikit-learn's bundled digits, breast cancer, wine and diabetes sets (they load
with no network) go into tables, one row in five as the test set.  pgdl packs
the training rows (standardized), trains a model on each, and scores the test
rows three ways: pgdl.metrics / confusion_matrix / roc_curve / evaluate_targets
over a test set packed with reference =>, the same over the raw rows, and
scikit-learn 1.2 over the probabilities pgdl.predict returns for each row.
Every metric must equal scikit-learn's within 1e-6, and the raw rows' must
equal the packed table's.  A test set packed with its own normalization must be
refused (22023).  Ends with "N passed, M failed".

Run with PGHOST/PGPORT/PGUSER pointing at a server where pgdl is installed; it
works in a database of its own (pgdl_metrics), dropped and created again.
"""
import math
import sys
import warnings

import numpy as np
import psycopg
from sklearn import datasets, metrics
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.preprocessing import label_binarize

TOLERANCE = 1e-6
DATABASE = "pgdl_metrics"

passed = 0
failed = 0


def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {what} {detail}")


def close(what, ours, theirs):
    """
    ours (pgdl's, None for SQL NULL) equals theirs within TOLERANCE, relative
    to values above 1 (a regression's MSE in the thousands carries float32's
    rounding of the outputs); NaN matches None.
    """
    theirs = float(theirs)
    if ours is None:
        check(what, math.isnan(theirs), f"pgdl NULL, scikit-learn {theirs}")
        return
    check(what, abs(ours - theirs) <= TOLERANCE * max(1.0, abs(theirs)), f"pgdl {ours!r}, scikit-learn {theirs!r}")


def connect(dbname):
    return psycopg.connect(dbname=dbname, autocommit=True)


def load(conn, name, x, y, label_type):
    conn.execute(f"CREATE TABLE {name}_rows (id integer, x double precision[], label {label_type})")
    with conn.cursor().copy(f"COPY {name}_rows FROM STDIN") as copy:
        for i, (xi, yi) in enumerate(zip(x, y)):
            label = [float(v) for v in yi] if isinstance(yi, np.ndarray) else yi.item()
            copy.write_row((i, [float(v) for v in xi], label))
    conn.execute(f"CREATE TABLE {name}_train AS SELECT * FROM {name}_rows WHERE id % 5 <> 0")
    conn.execute(f"CREATE TABLE {name}_test AS SELECT * FROM {name}_rows WHERE id % 5 = 0")
    conn.execute(f"SELECT pgdl.pack('{name}_train', 'x', 'label', '{name}_train_p', buffer_rows => 32, "
                 "partitions => 2, standardize => true)")
    # pgdl.pack's default buffer_rows and seed: what evaluation over raw rows reads, in the same order
    conn.execute(f"SELECT pgdl.pack('{name}_test', 'x', 'label', '{name}_test_p', partitions => 1, "
                 f"reference => '{name}_train_p')")


def fit(conn, name, spec, config, epochs):
    return conn.execute(f"SELECT pgdl.fit('{name}_train_p', %s::jsonb, %s::jsonb, {epochs})",
                        (spec, config)).fetchone()[0]


def predictions(conn, name, model):
    """The test rows' labels and pgdl.predict's outputs, as float64 (from pgdl's float32)."""
    rows = conn.execute(f"SELECT label, pgdl.predict({model}, x::real[]) FROM {name}_test ORDER BY id").fetchall()
    return [r[0] for r in rows], np.array([r[1] for r in rows], dtype=np.float32).astype(np.float64)


def metric_rows(conn, model, name, raw, top_k=2):
    if raw:
        sql = f"SELECT metric, class, average, value FROM pgdl.metrics({model}, '{name}_test', 'x', 'label', {top_k})"
    else:
        sql = f"SELECT metric, class, average, value FROM pgdl.metrics({model}, '{name}_test_p', {top_k})"
    return {(m, c, a): v for m, c, a, v in conn.execute(sql).fetchall()}


def check_raw_equals_packed(conn, name, model, ours):
    raw = metric_rows(conn, model, name, True)
    check(f"{name}: raw rows give the packed table's metrics", raw.keys() == ours.keys())
    for key, value in ours.items():
        other = raw.get(key)
        same = (value is None and other is None) or (value is not None and other is not None
                                                      and abs(value - other) <= 1e-12)
        check(f"{name}: raw {key}", same, f"packed {value!r}, raw {other!r}")
    packed = conn.execute(f"SELECT loss, accuracy, n FROM pgdl.evaluate({model}, '{name}_test_p')").fetchone()
    rows = conn.execute(f"SELECT loss, accuracy, n FROM pgdl.evaluate({model}, 'SELECT x, label FROM {name}_test', "
                        "'x', 'label')").fetchone()
    check(f"{name}: evaluate over a query equals evaluate over the referenced pack", packed == rows,
          f"{packed} against {rows}")


def check_classifier(conn, name, model, classes, binary_output=False):
    labels, out = predictions(conn, name, model)
    index = {c: i for i, c in enumerate(classes)}
    y = np.array([index[str(v)] for v in labels])
    p = np.column_stack([1.0 - out[:, 0], out[:, 0]]) if binary_output else out
    k = len(classes)
    pred = p.argmax(axis=1)
    ours = metric_rows(conn, model, name, False)
    tag = f"{name} ({'one logit' if binary_output else 'softmax'})"

    close(f"{tag} accuracy", ours[("accuracy", None, None)], metrics.accuracy_score(y, pred))
    top = metrics.top_k_accuracy_score(y, p[:, 1] if k == 2 else p, k=2, labels=range(k))
    close(f"{tag} top_k_accuracy", ours[("top_k_accuracy", None, None)], top)
    prec, rec, f1, support = metrics.precision_recall_fscore_support(y, pred, labels=range(k), average=None,
                                                                     zero_division=0)
    for c in range(k):
        close(f"{tag} precision {classes[c]}", ours[("precision", classes[c], None)], prec[c])
        close(f"{tag} recall {classes[c]}", ours[("recall", classes[c], None)], rec[c])
        close(f"{tag} f1 {classes[c]}", ours[("f1", classes[c], None)], f1[c])
        close(f"{tag} support {classes[c]}", ours[("support", classes[c], None)], support[c])
    for average in ("macro", "weighted"):
        prec, rec, f1, _ = metrics.precision_recall_fscore_support(y, pred, labels=range(k), average=average,
                                                                   zero_division=0)
        close(f"{tag} precision {average}", ours[("precision", None, average)], prec)
        close(f"{tag} recall {average}", ours[("recall", None, average)], rec)
        close(f"{tag} f1 {average}", ours[("f1", None, average)], f1)
    close(f"{tag} log_loss", ours[("log_loss", None, None)], metrics.log_loss(y, p, labels=range(k)))
    if k == 2:
        close(f"{tag} roc_auc", ours[("roc_auc", None, None)], metrics.roc_auc_score(y, p[:, 1]))
        close(f"{tag} average_precision", ours[("average_precision", None, None)],
              metrics.average_precision_score(y, p[:, 1]))
    else:
        close(f"{tag} roc_auc macro", ours[("roc_auc", None, "macro")],
              metrics.roc_auc_score(y, p, multi_class="ovr", average="macro"))
        close(f"{tag} average_precision macro", ours[("average_precision", None, "macro")],
              metrics.average_precision_score(label_binarize(y, classes=range(k)), p, average="macro"))
        for c in range(k):
            close(f"{tag} roc_auc {classes[c]}", ours[("roc_auc", classes[c], None)],
                  metrics.roc_auc_score(y == c, p[:, c]))
            close(f"{tag} average_precision {classes[c]}", ours[("average_precision", classes[c], None)],
                  metrics.average_precision_score(y == c, p[:, c]))
    close(f"{tag} n", ours[("n", None, None)], len(y))

    matrix = metrics.confusion_matrix(y, pred, labels=range(k))
    cells = conn.execute(f"SELECT actual, predicted, count FROM pgdl.confusion_matrix({model}, '{name}_test_p')").fetchall()
    check(f"{tag} confusion_matrix", sorted(cells) == sorted((classes[a], classes[b], int(matrix[a, b]))
                                                             for a in range(k) for b in range(k)), str(cells))

    positive = 1 if k == 2 else k - 1
    fpr, tpr, thresholds = metrics.roc_curve(y == positive, p[:, positive])
    curve = conn.execute(f"SELECT threshold, fpr, tpr FROM pgdl.roc_curve({model}, '{name}_test_p', %s)",
                         (None if k == 2 else classes[positive],)).fetchall()
    ok = len(curve) == len(fpr) and all(abs(a - b) <= TOLERANCE for row, ref in zip(curve, zip(thresholds, fpr, tpr))
                                        for a, b in zip(row, ref))
    check(f"{tag} roc_curve ({len(curve)} points)", ok, f"pgdl {curve[:3]}..., scikit-learn {len(fpr)} points")
    check_raw_equals_packed(conn, name, model, ours)


def check_regression(conn, name, model):
    labels, out = predictions(conn, name, model)
    y = np.array(labels, dtype=np.float32).astype(np.float64)
    pred = out[:, 0]
    ours = metric_rows(conn, model, name, False)
    mse = metrics.mean_squared_error(y, pred)
    close(f"{name} mse", ours[("mse", None, None)], mse)
    close(f"{name} rmse", ours[("rmse", None, None)], metrics.mean_squared_error(y, pred, squared=False))
    close(f"{name} mae", ours[("mae", None, None)], metrics.mean_absolute_error(y, pred))
    close(f"{name} r2", ours[("r2", None, None)], metrics.r2_score(y, pred))
    target = conn.execute(f"SELECT loss, rmse, mae, r2 FROM pgdl.evaluate_targets({model}, '{name}_test_p')").fetchone()
    close(f"{name} evaluate_targets loss", target[0], mse)
    close(f"{name} evaluate_targets rmse", target[1], math.sqrt(mse))
    close(f"{name} evaluate_targets mae", target[2], metrics.mean_absolute_error(y, pred))
    close(f"{name} evaluate_targets r2", target[3], metrics.r2_score(y, pred))
    check_raw_equals_packed(conn, name, model, ours)


def check_multilabel(conn, name, model):
    labels, out = predictions(conn, name, model)
    t = np.array(labels, dtype=np.float64)
    hard = (out > 0.5).astype(int)
    ours = metric_rows(conn, model, name, False)
    per_target = conn.execute("SELECT target, accuracy, precision, recall, f1, roc_auc, average_precision "
                              f"FROM pgdl.evaluate_targets({model}, '{name}_test_p') ORDER BY target").fetchall()
    for j in range(t.shape[1]):
        expected = (metrics.accuracy_score(t[:, j], hard[:, j]),
                    metrics.precision_score(t[:, j], hard[:, j], zero_division=0),
                    metrics.recall_score(t[:, j], hard[:, j], zero_division=0),
                    metrics.f1_score(t[:, j], hard[:, j], zero_division=0),
                    metrics.roc_auc_score(t[:, j], out[:, j]),
                    metrics.average_precision_score(t[:, j], out[:, j]))
        for what, ours_value, theirs in zip(("accuracy", "precision", "recall", "f1", "roc_auc", "average_precision"),
                                            per_target[j][1:], expected):
            close(f"{name} label {j + 1} {what} (evaluate_targets)", ours_value, theirs)
            close(f"{name} label {j + 1} {what} (metrics)", ours[(what, str(j + 1), None)], theirs)
    close(f"{name} subset accuracy", ours[("accuracy", None, None)], metrics.accuracy_score(t, hard))
    for what, fn in (("precision", metrics.precision_score), ("recall", metrics.recall_score),
                     ("f1", metrics.f1_score)):
        close(f"{name} {what} macro", ours[(what, None, "macro")], fn(t, hard, average="macro", zero_division=0))
    close(f"{name} roc_auc macro", ours[("roc_auc", None, "macro")], metrics.roc_auc_score(t, out, average="macro"))
    close(f"{name} average_precision macro", ours[("average_precision", None, "macro")],
          metrics.average_precision_score(t, out, average="macro"))


def check_refused(conn, name, model):
    """A test set normalized with its own statistics is an error, never a number."""
    conn.execute(f"SELECT pgdl.pack('{name}_test', 'x', 'label', '{name}_test_own', buffer_rows => 32, "
                 "partitions => 1, standardize => true)")
    try:
        conn.execute(f"SELECT * FROM pgdl.evaluate({model}, '{name}_test_own')")
        check(f"{name}: a test set of its own normalization is refused", False, "it answered")
    except psycopg.Error as e:
        check(f"{name}: a test set of its own normalization is refused (22023)", e.sqlstate == "22023",
              f"{e.sqlstate}: {e}")


def mlp(n_in, n_out, loss="cross_entropy"):
    return ('{"input": [%d], "layers": [{"type": "dense", "units": 32}, {"type": "relu"}, '
            '{"type": "dense", "units": %d}], "loss": "%s"}' % (n_in, n_out, loss))


def main():
    # top-k of two classes is 1, as scikit-learn warns; pgdl gives the same 1
    warnings.filterwarnings("ignore", category=UndefinedMetricWarning)
    with connect("postgres") as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        admin.execute(f"CREATE DATABASE {DATABASE}")
    with connect(DATABASE) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute("CREATE EXTENSION pgdl")
        adam = '{"optimizer": "adam", "lr": 0.01, "batch_size": 32, "seed": 7}'

        for name, loader in (("digits", datasets.load_digits), ("wine", datasets.load_wine),
                             ("cancer", datasets.load_breast_cancer)):
            x, y = loader(return_X_y=True)
            load(conn, name, x, y, "integer")
            classes = conn.execute(f"SELECT classes FROM pgdl.datasets WHERE packed = '{name}_train_p'::regclass").fetchone()[0]
            model = fit(conn, name, mlp(x.shape[1], len(classes)), adam, 10)
            check_classifier(conn, name, model, classes)
            check_refused(conn, name, model)
            if len(classes) == 2:
                one = fit(conn, name, mlp(x.shape[1], 1, "binary_cross_entropy"), adam, 10)
                check_classifier(conn, name, one, classes, binary_output=True)

        x, y = datasets.load_diabetes(return_X_y=True)
        load(conn, "diabetes", x, y, "double precision")
        model = fit(conn, "diabetes", mlp(x.shape[1], 1, "mse"), '{"optimizer": "adam", "lr": 0.05, "batch_size": 32, "seed": 7}', 30)
        check_regression(conn, "diabetes", model)

        x, y = datasets.load_digits(return_X_y=True)
        load(conn, "tags", x, np.column_stack([y % 2 == 0, y > 4]).astype(np.float64), "double precision[]")
        model = fit(conn, "tags", mlp(x.shape[1], 2, "binary_cross_entropy"), adam, 10)
        check_multilabel(conn, "tags", model)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
