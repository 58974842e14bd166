#!/usr/bin/python3
"""pgdl's metrics over a weighted packed table against scikit-learn's with sample_weight.

Test rows with a weight column (random positive weights, about a fifth of them
0, in float32 as the packed table's w keeps them) are packed with weight => 'w'
(reference => the training pack); a three-class classifier, a one-logit binary
classifier and a regressor trained on the unweighted training rows score them.
pgdl.metrics, evaluate_targets, confusion_matrix's weight, roc_curve and
pgdl.evaluate's loss must equal scikit-learn 1.2's metrics with sample_weight
(and the weighted mean of the rows' losses) on pgdl.predict's outputs within
1e-6, and must differ from the unweighted ones (the check can fail).  Ends with
"N passed, M failed".

Run with PGHOST/PGPORT/PGUSER pointing at a server where pgdl is installed; it
works in a database of its own (pgdl_weighted_metrics), dropped and created again.
"""
import math
import sys
import warnings

import numpy as np
import psycopg
from sklearn import metrics
from sklearn.preprocessing import label_binarize

TOLERANCE = 1e-6
DATABASE = "pgdl_weighted_metrics"
MLP = '{"input": [4], "layers": [{"type": "dense", "units": 16}, {"type": "relu"}, {"type": "dense", "units": %d}]%s}'
CONFIG = '{"lr": 0.05, "batch_size": 16, "seed": 3}'

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
    """ours (None for SQL NULL) equals theirs within TOLERANCE, relative above 1; NaN matches None."""
    theirs = float(theirs)
    if ours is None:
        check(what, math.isnan(theirs), f"pgdl NULL, scikit-learn {theirs}")
        return
    check(what, abs(ours - theirs) <= TOLERANCE * max(1.0, abs(theirs)), f"pgdl {ours!r}, scikit-learn {theirs!r}")


def load(conn):
    rng = np.random.default_rng(35)
    x = rng.normal(size=(600, 4))
    score = x[:, 0] - x[:, 1] + 0.5 * rng.normal(size=600)
    label = np.digitize(score, [-0.7, 0.7])
    w = (rng.random(600) * 3.0).astype(np.float32)
    w[rng.random(600) < 0.2] = 0.0
    conn.execute("CREATE TABLE wm_rows (id integer, x double precision[], label integer, binary_label integer, "
                 "target double precision, w real)")
    with conn.cursor().copy("COPY wm_rows FROM STDIN") as copy:
        for i in range(600):
            copy.write_row((i, [float(v) for v in x[i]], int(label[i]), int(score[i] > 0),
                            float(2 * x[i, 0] - x[i, 2] + 0.3 * rng.normal()), float(w[i])))
    conn.execute("CREATE TABLE wm_train AS SELECT * FROM wm_rows WHERE id % 3 <> 0")
    conn.execute("CREATE TABLE wm_test AS SELECT * FROM wm_rows WHERE id % 3 = 0")


def prepare(conn, task, column, units, loss=""):
    conn.execute(f"SELECT pgdl.pack('wm_train', 'x', '{column}', 'wm_{task}_train_p', buffer_rows => 32, "
                 "partitions => 2, standardize => true)")
    conn.execute(f"SELECT pgdl.pack('wm_test', 'x', '{column}', 'wm_{task}_test_p', buffer_rows => 40, "
                 f"partitions => 1, reference => 'wm_{task}_train_p', weight => 'w')")
    model = conn.execute(f"SELECT pgdl.fit('wm_{task}_train_p', %s::jsonb, %s::jsonb, 3)",
                         (MLP % (units, loss), CONFIG)).fetchone()[0]
    rows = conn.execute(f"SELECT {column}, w, pgdl.predict({model}, x::real[]) FROM wm_test ORDER BY id").fetchall()
    y = np.array([r[0] for r in rows])
    w = np.array([r[1] for r in rows], dtype=np.float32).astype(np.float64)
    out = np.array([r[2] for r in rows], dtype=np.float32).astype(np.float64)
    ours = {(m, c, a): v for m, c, a, v in conn.execute(
        f"SELECT metric, class, average, value FROM pgdl.metrics({model}, 'wm_{task}_test_p')").fetchall()}
    return model, y, w, out, ours


def check_classifier(conn, task, column, units, loss=""):
    model, y, w, out, ours = prepare(conn, task, column, units, loss)
    p = np.column_stack([1.0 - out[:, 0], out[:, 0]]) if units == 1 else out
    k = p.shape[1]
    classes = [str(c) for c in range(k)]
    pred = p.argmax(axis=1)
    close(f"{task} accuracy", ours[("accuracy", None, None)], metrics.accuracy_score(y, pred, sample_weight=w))
    check(f"{task} accuracy is weighted", abs(ours[("accuracy", None, None)] - metrics.accuracy_score(y, pred)) > 1e-4)
    top = metrics.top_k_accuracy_score(y, p[:, 1] if k == 2 else p, k=2, labels=range(k), sample_weight=w)
    close(f"{task} top_k_accuracy", ours[("top_k_accuracy", None, None)], top)
    prec, rec, f1, support = metrics.precision_recall_fscore_support(y, pred, labels=range(k), average=None,
                                                                     zero_division=0, sample_weight=w)
    for c in range(k):
        for name, values in (("precision", prec), ("recall", rec), ("f1", f1), ("support", support)):
            close(f"{task} {name} {c}", ours[(name, classes[c], None)], values[c])
    for average in ("macro", "weighted"):
        scores = metrics.precision_recall_fscore_support(y, pred, labels=range(k), average=average,
                                                         zero_division=0, sample_weight=w)
        for name, value in zip(("precision", "recall", "f1"), scores):
            close(f"{task} {name} {average}", ours[(name, None, average)], value)
    close(f"{task} log_loss", ours[("log_loss", None, None)], metrics.log_loss(y, p, labels=range(k), sample_weight=w))
    if k == 2:
        close(f"{task} roc_auc", ours[("roc_auc", None, None)], metrics.roc_auc_score(y, p[:, 1], sample_weight=w))
        close(f"{task} average_precision", ours[("average_precision", None, None)],
              metrics.average_precision_score(y, p[:, 1], sample_weight=w))
    else:
        close(f"{task} roc_auc macro", ours[("roc_auc", None, "macro")],
              metrics.roc_auc_score(y, p, multi_class="ovr", average="macro", sample_weight=w))
        close(f"{task} average_precision macro", ours[("average_precision", None, "macro")],
              metrics.average_precision_score(label_binarize(y, classes=range(k)), p, average="macro",
                                              sample_weight=w))
        for c in range(k):
            close(f"{task} roc_auc {c}", ours[("roc_auc", classes[c], None)],
                  metrics.roc_auc_score(y == c, p[:, c], sample_weight=w))
    close(f"{task} n", ours[("n", None, None)], len(y))
    matrix = metrics.confusion_matrix(y, pred, labels=range(k), sample_weight=w)
    counts = metrics.confusion_matrix(y, pred, labels=range(k))
    for a, b, count, weight in conn.execute(
            f"SELECT actual, predicted, count, weight FROM pgdl.confusion_matrix({model}, 'wm_{task}_test_p')"):
        check(f"{task} confusion_matrix count {a} {b}", count == counts[int(a), int(b)], f"{count}")
        close(f"{task} confusion_matrix weight {a} {b}", weight, matrix[int(a), int(b)])
    positive = k - 1
    fpr, tpr, thresholds = metrics.roc_curve(y == positive, p[:, positive], sample_weight=w)
    curve = conn.execute(f"SELECT threshold, fpr, tpr FROM pgdl.roc_curve({model}, 'wm_{task}_test_p', %s)",
                         (None if k == 2 else classes[positive],)).fetchall()
    ok = len(curve) == len(fpr) and all(abs(a - b) <= TOLERANCE for row, ref in zip(curve, zip(thresholds, fpr, tpr))
                                        for a, b in zip(row, ref))
    check(f"{task} roc_curve ({len(curve)} points)", ok, f"scikit-learn {len(fpr)} points")
    # pgdl.evaluate: the weighted mean of the rows' cross-entropy (log loss unclipped), and the weighted accuracy
    loss, accuracy = conn.execute(f"SELECT loss, accuracy FROM pgdl.evaluate({model}, 'wm_{task}_test_p')").fetchone()
    rows_loss = -np.log(np.clip(p[np.arange(len(y)), y], 1e-300, None))
    close(f"{task} evaluate loss", loss, np.sum(w * rows_loss) / np.sum(w))
    close(f"{task} evaluate accuracy", accuracy, metrics.accuracy_score(y, pred, sample_weight=w))


def check_regression(conn):
    model, y, w, out, ours = prepare(conn, "regression", "target", 1, ', "loss": "mse"')
    y = y.astype(np.float32).astype(np.float64)
    pred = out[:, 0]
    mse = metrics.mean_squared_error(y, pred, sample_weight=w)
    close("regression mse", ours[("mse", None, None)], mse)
    check("regression mse is weighted", abs(ours[("mse", None, None)] - metrics.mean_squared_error(y, pred)) > 1e-5)
    close("regression rmse", ours[("rmse", None, None)], math.sqrt(mse))
    close("regression mae", ours[("mae", None, None)], metrics.mean_absolute_error(y, pred, sample_weight=w))
    close("regression r2", ours[("r2", None, None)], metrics.r2_score(y, pred, sample_weight=w))
    target = conn.execute(f"SELECT loss, rmse, mae, r2 FROM pgdl.evaluate_targets({model}, 'wm_regression_test_p')"
                          ).fetchone()
    close("regression evaluate_targets loss", target[0], mse)
    close("regression evaluate_targets r2", target[3], metrics.r2_score(y, pred, sample_weight=w))
    loss = conn.execute(f"SELECT loss FROM pgdl.evaluate({model}, 'wm_regression_test_p')").fetchone()[0]
    close("regression evaluate loss", loss, mse)


def main():
    warnings.filterwarnings("ignore")
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        admin.execute(f"CREATE DATABASE {DATABASE}")
    with psycopg.connect(dbname=DATABASE, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute("CREATE EXTENSION pgdl")
        load(conn)
        check_classifier(conn, "three_classes", "label", 3)
        check_classifier(conn, "one_logit", "binary_label", 1, ', "loss": "binary_cross_entropy"')
        check_regression(conn)
    with psycopg.connect(dbname="postgres", autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
