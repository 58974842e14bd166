#!/usr/bin/env python3
"""Preprocessing that travels with the model (docs/reference/pack.md#preprocessing-imputation-scaling-one-hot),
run by regress/onnx/run.sh.

Makes 600 rows of 5 numeric features (NULLs in two columns, NaN in a third, one of a single value) and a
color, packs them with each imputation and scaling, and checks:

1. the statistics against scikit-learn 1.2's on the same float32 values: SimpleImputer's statistics_ (mean,
   median, constant), MissingIndicator's features_ (the indicators), then, on the imputed values,
   StandardScaler's mean_ and scale_, MinMaxScaler's data_min_ and data_range_, RobustScaler's center_ and
   scale_ (a divisor of 0 is 1 in both); OneHotEncoder's categories_ for one_hot; each equal as float32
   (within one unit in the last place; the standard deviation within 1e-6);
2. pgdl.export_onnx of a model trained on each: onnx.checker accepts the file, its input takes the raw
   features, and onnxruntime-node on the raw rows (a missing value as NaN) reproduces pgdl.predict within
   1e-5;
3. pgdl.import_onnx refuses a file with imputation nodes (0A000), takes back one exported without its
   preprocessing, and refuses a forged normalization over the model's whole input, indicators included;
4. a model with a one-hot column is refused by export (0A000), and so is no other.

Prints "ok - ..." / "not ok - ..." and ends with "N passed, M failed".
"""
import os
import sys
import tempfile
import traceback

import numpy as np
import onnx
import psycopg
from sklearn.impute import MissingIndicator, SimpleImputer
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, RobustScaler, StandardScaler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_export as ex  # noqa: E402  (its onnxruntime-node runner and counters are reused)

ROWS = 600
PACKS = {
    # name: (impute, impute_value, scaling)
    "pre_mean_std": ("mean", None, "standard"),
    "pre_median_robust": ("median", None, "robust"),
    "pre_const_minmax": ("constant", -3.5, "minmax"),
    "pre_mean_plain": ("mean", None, None),
}
SCALERS = {"standard": (StandardScaler, "mean_", "scale_", "mean", "std"),
           "minmax": (MinMaxScaler, "data_min_", "data_range_", "min", "range"),
           "robust": (RobustScaler, "center_", "scale_", "median", "iqr")}


def make_data(conn):
    rng = np.random.default_rng(11)
    x = rng.normal(0, 1, (ROWS, 5)).astype(np.float32) * np.float32([1, 10, 100, 1, 0.1])
    x[:, 3] = 2.5                                   # one value only
    x[rng.random(ROWS) < 0.1, 0] = np.nan           # NULL
    x[rng.random(ROWS) < 0.2, 1] = np.nan           # NULL
    x[rng.random(ROWS) < 0.05, 2] = np.nan          # NaN in the table
    y = (np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 1]) / 10 > 0).astype(int)
    colors = rng.choice(["red", "green", "blue", None], ROWS)
    conn.execute("CREATE TABLE pre (id integer, a real, b real, c double precision, d real, e real, color text, "
                 "label integer)")
    with conn.cursor().copy("COPY pre FROM STDIN") as copy:
        for i in range(ROWS):
            v = [None if (j < 2 and np.isnan(x[i, j])) else float(x[i, j]) for j in range(5)]
            copy.write_row([i] + v + [colors[i], int(y[i])])
    return x, colors


def same_f32(what, ours, theirs, rtol=0.0):
    ours = np.asarray(ours, dtype=np.float32)
    theirs = np.asarray(theirs, dtype=np.float64).astype(np.float32)
    ulp = np.spacing(np.abs(theirs))
    ok = ours.shape == theirs.shape and bool(np.all(np.abs(ours - theirs) <= np.maximum(ulp, rtol * np.abs(theirs))))
    ex.check(ok, what, f"pgdl {ours!r}\nscikit-learn {theirs!r}")


def check_statistics(conn, name, x):
    impute, value, scaling = PACKS[name]
    imputation, norm = conn.execute("SELECT imputation, normalization FROM pgdl.datasets WHERE packed = %s::regclass",
                                    (name,)).fetchone()
    imputer = SimpleImputer(strategy=impute, fill_value=value).fit(x.astype(np.float64))
    same_f32(f"{name}: imputed values are SimpleImputer's statistics_", imputation["values"], imputer.statistics_)
    features = MissingIndicator().fit(x).features_
    ex.check(imputation["indicators"] == [int(f) + 1 for f in features],
             f"{name}: indicators are MissingIndicator's features_", f"{imputation['indicators']} {features}")
    if scaling is None:
        ex.check(norm == {"scale": 1}, f"{name}: no scaling", norm)
        return
    cls, center, divisor, ckey, dkey = SCALERS[scaling]
    scaler = cls().fit(imputer.transform(x.astype(np.float64)).astype(np.float32).astype(np.float64))
    same_f32(f"{name}: {ckey} is {cls.__name__}'s {center}", norm[ckey], getattr(scaler, center))
    # MinMaxScaler keeps a range of 0 in data_range_ and divides by 1 (its scale_ is 1 / the handled range)
    theirs = getattr(scaler, divisor)
    same_f32(f"{name}: {dkey} is {cls.__name__}'s {divisor} (0 as 1)", norm[dkey], np.where(theirs == 0, 1, theirs),
             1e-6 if scaling == "standard" else 0.0)


def pgdl_predict(conn, model, x):
    """pgdl.predict of each raw row, a missing value as NULL."""
    rows = [[None if np.isnan(v) else float(v) for v in r] for r in x]
    got = [conn.execute("SELECT pgdl.predict(%s::bigint, %s::float8[])", (model, r)).fetchone()[0] for r in rows]
    return np.array(got, dtype=np.float32)


def check_export(conn, name, x, tmp, ort_ok):
    n_in = 5 + len(conn.execute("SELECT imputation -> 'indicators' FROM pgdl.datasets WHERE packed = %s::regclass",
                                (name,)).fetchone()[0])
    spec = ('{"input": [%d], "layers": [{"type": "dense", "units": 16}, {"type": "relu"}, '
            '{"type": "dense", "units": 2}]}' % n_in)
    model = conn.execute("SELECT pgdl.fit(%s, %s::jsonb, '{\"seed\": 5}', 2)", (name, spec)).fetchone()[0]
    blob = bytes(conn.execute("SELECT pgdl.export_onnx(%s::bigint)", (model,)).fetchone()[0])
    proto = onnx.load_from_string(blob)
    try:
        onnx.checker.check_model(proto, full_check=True)
        ex.check(True, f"{name}: onnx.checker accepts the export")
    except Exception as e:  # noqa: BLE001
        ex.check(False, f"{name}: onnx.checker accepts the export", e)
    dims = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim[1:]]
    ex.check(dims == [5], f"{name}: the file takes the 5 raw features", dims)
    if not ort_ok:
        ex.check(False, f"{name}: onnxruntime-node runs it", "onnxruntime-node is not installed")
        return
    want = pgdl_predict(conn, model, x)
    got = ex.ort_run(blob, x.astype(np.float32), tmp)
    ok = got.shape == want.shape and bool(np.all(np.abs(got - want) <= ex.TOL))
    ex.check(ok, f"{name}: onnxruntime-node on raw rows (NaN missing) is pgdl.predict within {ex.TOL}",
             f"largest difference {np.max(np.abs(got - want)) if got.shape == want.shape else got.shape}")


def check_import(conn, name):
    """An export with imputation nodes is not imported; one without comes back; a forged normalization of the
    model's whole input (indicators included) is refused, never read past the dataset's features."""
    model = conn.execute("SELECT max(id) FROM pgdl.models WHERE dataset = (SELECT id FROM pgdl.datasets "
                         "WHERE packed = %s::regclass)", (name,)).fetchone()[0]
    with_nodes = conn.execute("SELECT pgdl.export_onnx(%s::bigint)", (model,)).fetchone()[0]
    try:
        conn.execute("SELECT pgdl.import_onnx('pre_back', %s, %s::regclass)", (with_nodes, name))
        ex.check(False, f"{name}: import of a file with imputation nodes refused", "it was imported")
    except psycopg.Error as e:
        ex.check(e.sqlstate == "0A000", f"{name}: import of a file with imputation nodes refused (0A000)", e)
    bare = bytes(conn.execute("SELECT pgdl.export_onnx(%s::bigint, false)", (model,)).fetchone()[0])
    back = conn.execute("SELECT pgdl.import_onnx('pre_back', %s, %s::regclass)", (bare, name)).fetchone()[0]
    row = [1.0, None, 2.0, 2.5, 0.1]
    same = conn.execute("SELECT pgdl.predict(%s::bigint, %s::float8[]) = pgdl.predict(%s::bigint, %s::float8[])",
                        (model, row, back, row)).fetchone()[0]
    ex.check(same, f"{name}: exported without its preprocessing and imported with its dataset, it predicts the same")
    proto = onnx.load_from_string(bare)
    n = proto.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    first = proto.graph.node[0]
    proto.graph.initializer.extend([onnx.numpy_helper.from_array(np.zeros(n, np.float32), "pgdl_normalize.mean"),
                                    onnx.numpy_helper.from_array(np.ones(n, np.float32), "pgdl_normalize.std")])
    sub = onnx.helper.make_node("Sub", ["input", "pgdl_normalize.mean"], ["pgdl_normalize_sub"], "pgdl_normalize_sub")
    div = onnx.helper.make_node("Div", ["pgdl_normalize_sub", "pgdl_normalize.std"], ["pgdl_normalize_div"],
                                "pgdl_normalize_div")
    first.input[0] = "pgdl_normalize_div"
    onnx.helper.set_model_props(proto, {"pgdl.normalization": '{"mean": [], "std": []}'})
    proto.graph.node.insert(0, div)
    proto.graph.node.insert(0, sub)
    try:
        conn.execute("SELECT pgdl.import_onnx('pre_forged', %s, %s::regclass)", (proto.SerializeToString(), name))
        ex.check(False, f"{name}: a normalization of {n} features refused", "it was imported")
    except psycopg.Error as e:
        ex.check(e.sqlstate == "22023", f"{name}: a normalization of {n} features (indicators too) refused (22023)", f"{e.sqlstate} {e} {e.diag.message_detail}")


def check_one_hot(conn, colors):
    conn.execute("SELECT pgdl.pack('pre', 'a, b', 'label', 'pre_hot', partitions => 1, impute => 'mean', "
                 "one_hot => 'color')")
    vocab = conn.execute("SELECT categorical -> 0 -> 'values' FROM pgdl.datasets "
                         "WHERE packed = 'pre_hot'::regclass").fetchone()[0]
    enc = OneHotEncoder(handle_unknown="ignore").fit(np.array([c for c in colors if c is not None])[:, None])
    ex.check(vocab == list(enc.categories_[0]), "one_hot: the values are OneHotEncoder's categories_",
             f"{vocab} {enc.categories_}")
    model = conn.execute("SELECT pgdl.fit('pre_hot', '{\"input\": [7], \"layers\": [{\"type\": \"dense\", "
                         "\"units\": 2}]}'::jsonb, '{}', 1)").fetchone()[0]
    try:
        conn.execute("SELECT pgdl.export_onnx(%s::bigint)", (model,))
        ex.check(False, "one_hot: export refused (0A000)", "it was exported")
    except psycopg.Error as e:
        ex.check(e.sqlstate == "0A000", "one_hot: export refused (0A000)", e)


def main():
    with psycopg.connect(autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pgdl")
        x, colors = make_data(conn)
        ort_ok = ex.ort_installed()
        with tempfile.TemporaryDirectory() as tmp:
            for name, (impute, value, scaling) in PACKS.items():
                conn.execute("SELECT pgdl.pack('pre', 'a, b, c, d, e', 'label', %s, buffer_rows => 64, "
                             "partitions => 2, impute => %s, impute_value => %s, scaling => %s)",
                             (name, impute, value, scaling))
                check_statistics(conn, name, x)
                check_export(conn, name, x, tmp, ort_ok)
        check_import(conn, "pre_mean_std")
        check_one_hot(conn, colors)


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001
        ex.check(False, "test_preprocess.py ran to its end", traceback.format_exc())
    print(f"{ex.passed} passed, {ex.failed} failed")
    sys.exit(1 if ex.failed else 0)
