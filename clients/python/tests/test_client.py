"""The Python client against a server with pgdl: PGHOST, PGPORT, PGUSER, PGDATABASE name it.

The database gets the extension and a few tables named py_*; each class makes what it uses.
"""
import io
import os
import tempfile
import threading
import unittest

import numpy as np
import psycopg
from matplotlib.figure import Figure
from tqdm import tqdm

import pgdl

SPEC = {"input": [16], "layers": [{"type": "dense", "units": 32}, {"type": "relu"},
                                   {"type": "dense", "units": 4}]}
NAMES = ["circle", "square", "star", "triangle"]

# 2,000 points of 16 features in 4 classes (as regress/t/PgdlTest.pm's points), with an integer label and
# the same label as a name.
SETUP = """
DROP TABLE IF EXISTS py_points, py_points_packed, py_named_packed CASCADE;
CREATE TABLE py_points AS
SELECT i, x, (x[1] + x[2] + x[3] > 0)::int * 2 + (x[4] - x[5] + x[6] > 0)::int AS label
  FROM (SELECT i, array_agg(sin(i * (j + 0.5) * 0.731 + j * j)::real ORDER BY j) AS x
          FROM generate_series(1, 2000) i, generate_series(1, 16) j GROUP BY i) s;
ALTER TABLE py_points ADD COLUMN name text;
UPDATE py_points SET name = (ARRAY['circle', 'square', 'star', 'triangle'])[label + 1];
SELECT pgdl.pack('py_points', 'x', 'label', 'py_points_packed', buffer_rows => 50, partitions => 2);
SELECT pgdl.pack('py_points', 'x', 'name', 'py_named_packed', buffer_rows => 50, partitions => 2);
"""


def connect():
    conn = psycopg.connect(autocommit=True)
    pgdl.register(conn)
    return conn


class RecordingBar(tqdm):
    """A tqdm bar, silent, that remembers each position it reached."""

    def __init__(self, **kwargs):
        super().__init__(file=io.StringIO(), **kwargs)
        self.history = []

    def update(self, n=1):
        super().update(n)
        self.history.append(self.n)


class Fixture(unittest.TestCase):
    conn = None

    @classmethod
    def setUpClass(cls):
        cls.conn = connect()
        cls.conn.execute("CREATE EXTENSION IF NOT EXISTS pgdl")

    @classmethod
    def tearDownClass(cls):
        cls.conn.close()

    def sqlstate(self, expected, fn, *args, **kwargs):
        """fn(*args) raises a psycopg error with SQLSTATE `expected`; the connection stays usable."""
        with self.assertRaises(psycopg.Error) as cm:
            fn(*args, **kwargs)
        self.assertEqual(cm.exception.sqlstate, expected, str(cm.exception))
        self.assertEqual(self.conn.execute("SELECT 1").fetchone(), (1,))
        return cm.exception


class ArraysTest(Fixture):
    def random_floats(self):
        bits = np.random.default_rng(7).integers(0, 2 ** 32, size=4096, dtype=np.uint64).astype(np.uint32)
        special = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3.4028235e38, 1.1754944e-38],
                           dtype=np.float32)
        return np.concatenate([bits.view(np.float32), special])

    def test_float32_round_trips_bit_for_bit(self):
        x = self.random_floats()
        self.assertTrue(np.isnan(x).any(), "the sample holds NaNs with payloads")
        with self.conn.cursor(binary=True) as cur:
            self.assertEqual(cur.execute("SELECT %s", [x]).fetchone()[0].view(np.uint32).tolist(),
                             x.view(np.uint32).tolist())
        # through a table and the text format: every number exactly, NaN as NaN
        self.conn.execute("DROP TABLE IF EXISTS py_arrays")
        self.conn.execute("CREATE TABLE py_arrays (a real[])")
        self.conn.execute("INSERT INTO py_arrays VALUES (%s)", [x])
        back = self.conn.execute("SELECT a FROM py_arrays").fetchone()[0]
        self.assertEqual(back.dtype, np.float32)
        finite = ~np.isnan(x)
        self.assertEqual(back[finite].view(np.uint32).tolist(), x[finite].view(np.uint32).tolist())
        self.assertTrue(np.isnan(back[~finite]).all())

    def test_ndarray_is_real_array_without_cast(self):
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        typ, length, back = self.conn.execute("SELECT pg_typeof(%s)::text, array_length(%s, 1), %s",
                                              [x, x, x]).fetchone()
        self.assertEqual((typ, length), ("real[]", 6))
        self.assertEqual(back.tolist(), [0, 1, 2, 3, 4, 5])		# C order
        self.assertEqual(self.conn.execute("SELECT %s", [np.empty(0, np.float32)]).fetchone()[0].size, 0)

    def test_other_dtypes_become_float32(self):
        x = np.array([0.1, 1 / 3, -2.5e-8], dtype=np.float64)
        self.assertEqual(self.conn.execute("SELECT %s", [x]).fetchone()[0].tolist(),
                         x.astype(np.float32).tolist())
        self.assertEqual(self.conn.execute("SELECT %s", [np.arange(3)]).fetchone()[0].tolist(), [0, 1, 2])
        with self.assertRaisesRegex(ValueError, "out of range for type real"):
            self.conn.execute("SELECT %s", [np.array([1.0, 1e300])])
        with self.assertRaisesRegex(TypeError, "cannot be sent as real"):
            self.conn.execute("SELECT %s", [np.array(["a"])])

    def test_real_arrays_load_shaped_and_masked(self):
        for binary in (False, True):
            with self.conn.cursor(binary=binary) as cur:
                grid, nulls, empty = cur.execute(
                    "SELECT '{{1,2,3},{4,5,6}}'::real[], '{1,NULL,NaN}'::real[], '{}'::real[]").fetchone()
            self.assertEqual((grid.shape, grid.dtype, grid[1, 2]), ((2, 3), np.float32, 6))
            self.assertEqual(nulls.mask.tolist(), [False, True, False])
            self.assertTrue(np.isnan(nulls[2]))
            self.assertEqual(empty.size, 0)
        # and back: a masked array's masked elements go as NULL
        sent = np.ma.MaskedArray(np.array([1.5, 1e300, np.nan, -2], dtype=np.float64), mask=[0, 1, 0, 1])
        text, back = self.conn.execute("SELECT %s::text, %s", [sent, sent]).fetchone()
        self.assertEqual(text, "{1.5,NULL,NaN,NULL}")
        self.assertEqual(back.mask.tolist(), [False, True, False, True])

    def test_numpy_scalars(self):
        row = self.conn.execute("SELECT pg_typeof(%s)::text, pg_typeof(%s)::text, pg_typeof(%s)::text, %s",
                                [np.float32(1.5), np.float64(2.5), np.int64(7), np.int16(3)]).fetchone()
        self.assertEqual(row, ("real", "double precision", "bigint", 3))


class TrainedModelTest(Fixture):
    """A model fitted on py_points_packed, and one on the same points with named labels."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.conn.execute(SETUP)
        cls.bar = RecordingBar()
        cls.epochs = 4
        cls.model = pgdl.fit(cls.conn, "py_points_packed", SPEC, {"lr": 0.05, "momentum": 0.9},
                             epochs=cls.epochs, bar=cls.bar)
        cls.named = pgdl.fit(cls.conn, "py_named_packed", SPEC, {"lr": 0.05}, epochs=2, progress=False)
        rows = cls.conn.execute("SELECT x, label, name FROM py_points ORDER BY i LIMIT 40").fetchall()
        cls.X = np.stack([r[0] for r in rows])
        cls.labels = [r[1] for r in rows]

    def test_fit_returns_the_stored_model(self):
        row = self.conn.execute("SELECT spec->'layers'->0->>'units', run FROM pgdl.models WHERE id = %s",
                                [self.model]).fetchone()
        self.assertEqual(row[0], "32")

    def test_progress_bar_ends_at_the_last_epoch(self):
        self.assertEqual(self.bar.history, sorted(self.bar.history))
        self.assertEqual((self.bar.n, self.bar.total), (self.epochs, self.epochs))
        self.assertIn("loss", self.bar.postfix)

    def test_weights_are_named_and_shaped(self):
        w = pgdl.model_weights(self.conn, self.model)
        self.assertEqual({k: v.shape for k, v in w.items()},
                         {"0.weight": (32, 16), "0.bias": (32,), "2.weight": (4, 32), "2.bias": (4,)})
        self.assertEqual(list(w), ["0.weight", "0.bias", "2.weight", "2.bias"])
        flat = self.conn.execute("SELECT \"values\" FROM pgdl.model_weights(%s::bigint) WHERE layer = 2 "
                                 "AND name = 'weight'", [self.model]).fetchone()[0]
        self.assertEqual(w["2.weight"].reshape(-1).tolist(), flat.tolist())

    def test_numpy_forward_pass_matches_predict(self):
        w = pgdl.model_weights(self.conn, self.model)
        for x in self.X[:5]:
            h = np.maximum(w["0.weight"] @ x + w["0.bias"], 0)
            z = (w["2.weight"] @ h + w["2.bias"]).astype(np.float64)
            p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
            np.testing.assert_allclose(pgdl.predict(self.conn, self.model, x), p, rtol=1e-4, atol=1e-6)

    def test_weights_round_trip_predicts_bit_for_bit(self):
        blob = pgdl.model_from_weights(self.conn, SPEC, pgdl.model_weights(self.conn, self.model))
        self.assertIsInstance(blob, bytes)
        for x in self.X[:10]:
            sql_out = self.conn.execute("SELECT pgdl.predict(%s::bigint, %s)", [self.model, x]).fetchone()[0]
            self.assertEqual(pgdl.predict(self.conn, blob, x).tobytes(), sql_out.tobytes())
            self.assertEqual(pgdl.predict(self.conn, self.model, x).tobytes(), sql_out.tobytes())

    def test_onnx_round_trip_keeps_predictions_bit_for_bit(self):
        path = os.path.join(tempfile.mkdtemp(), "model.onnx")
        data = pgdl.export_onnx(self.conn, self.model, path)
        self.assertEqual(data[:2], b"\x08\x07", "an ONNX ModelProto starts with ir_version 7")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), data)
        dataset = self.conn.execute("SELECT d.packed::text FROM pgdl.models m JOIN pgdl.datasets d "
                                    "ON d.id = m.dataset WHERE m.id = %s", [self.model]).fetchone()[0]
        back = pgdl.import_onnx(self.conn, None, path, dataset=dataset)
        self.assertNotEqual(back, self.model)
        for x in self.X[:10]:
            self.assertEqual(pgdl.predict(self.conn, back, x).tobytes(),
                             pgdl.predict(self.conn, self.model, x).tobytes())
        bare = pgdl.export_onnx(self.conn, self.model, with_normalization=False)
        self.assertLess(len(bare), len(data))
        self.sqlstate("22023", pgdl.import_onnx, self.conn, None, b"\x01\x02")

    def test_integer_labels_come_back_as_int(self):
        sql_labels = [self.conn.execute("SELECT pgdl.predict_class(%s::bigint, %s)", [self.model, x]).fetchone()[0]
                      for x in self.X[:10]]
        labels = [pgdl.predict_class(self.conn, self.model, x) for x in self.X[:10]]
        self.assertTrue(all(type(v) is int for v in labels), labels)
        self.assertEqual([str(v) for v in labels], sql_labels)
        by_name = pgdl.predict_class(self.conn, pgdl_name(self.conn, self.model), self.X[0])
        self.assertEqual(by_name, labels[0])
        accuracy = np.mean([p == t for p, t in zip(labels, self.labels)])
        self.assertGreater(accuracy, 0.5, "an int compares with the integer label column")

    def test_text_labels_come_back_as_str(self):
        label = pgdl.predict_class(self.conn, self.named, self.X[0])
        self.assertIsInstance(label, str)
        self.assertIn(label, NAMES)

    def test_a_blob_gives_class_indices(self):
        blob = self.conn.execute("SELECT weights FROM pgdl.models WHERE id = %s", [self.named]).fetchone()[0]
        label = pgdl.predict_class(self.conn, blob, self.X[0])
        self.assertEqual(NAMES[label], pgdl.predict_class(self.conn, self.named, self.X[0]))

    def test_predict_batch_equals_per_row(self):
        got = pgdl.predict_batch(self.conn, self.model, self.X, batch_size=7)
        self.assertEqual(got.labels, [pgdl.predict_class(self.conn, self.model, x) for x in self.X])
        best = [pgdl.predict(self.conn, self.model, x).max() for x in self.X]
        np.testing.assert_allclose(got.probabilities, best, rtol=1e-5)
        saved, pgdl.inference._CHUNK_VALUES = pgdl.inference._CHUNK_VALUES, 16 * 7	# 7 examples per INSERT
        try:
            self.assertEqual(pgdl.predict_batch(self.conn, self.model, self.X, batch_size=7).labels, got.labels)
        finally:
            pgdl.inference._CHUNK_VALUES = saved
        named = pgdl.predict_batch(self.conn, self.named, self.X[:3])
        self.assertTrue(all(isinstance(v, str) for v in named.labels))
        left = self.conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'pgdl_client_%'").fetchone()
        self.assertEqual(left, (0,), "the temporary table is gone")

    def test_run_metrics_one_row_per_epoch(self):
        run = self.conn.execute("SELECT run FROM pgdl.models WHERE id = %s", [self.model]).fetchone()[0]
        df = pgdl.run_metrics(self.conn, run)
        self.assertEqual(df["epoch"].tolist(), list(range(1, self.epochs + 1)))
        self.assertTrue(df["train_loss"].notna().all())
        self.assertIsInstance(df["owner"].iloc[0], str)
        fig = pgdl.plot_training_curves(df, title="points")
        self.assertIsInstance(fig, Figure)
        self.assertEqual([len(ax.lines) for ax in fig.axes], [1, 1])	# training loss, training accuracy
        png = io.BytesIO()
        fig.savefig(png, format="png")
        self.assertEqual(png.getvalue()[:8], b"\x89PNG\r\n\x1a\n")
        with self.assertRaises(LookupError):
            pgdl.run_metrics(self.conn, 10 ** 15)

    def test_metrics_as_the_server_gives_them(self):
        df = pgdl.metrics(self.conn, self.model, "py_points_packed")
        rows = self.conn.execute("SELECT metric, class, average, value FROM pgdl.metrics(%s::bigint, "
                                 "'py_points_packed')", [self.model]).fetchall()
        self.assertEqual(list(df.columns), ["metric", "class", "average", "value"])
        self.assertEqual([tuple(None if v is None or v != v else v for v in r) for r in df.itertuples(index=False)],
                         rows)
        raw = pgdl.metrics(self.conn, self.model, "SELECT x, label FROM py_points", "x", "label", top_k=3)
        accuracy = df.loc[(df["metric"] == "accuracy") & df["class"].isna(), "value"].item()
        self.assertEqual(raw.loc[(raw["metric"] == "accuracy") & raw["class"].isna(), "value"].item(), accuracy)
        matrix = pgdl.confusion_matrix(self.conn, self.model, "py_points_packed")
        self.assertEqual(matrix.shape, (4, 4))
        self.assertEqual(int(matrix.to_numpy().sum()), 2000)
        self.assertAlmostEqual(np.trace(matrix.to_numpy()) / 2000, accuracy, places=12)
        # an unweighted table: each row weighs 1, so the weights' sums are the counts
        weighted = pgdl.confusion_matrix(self.conn, self.model, "py_points_packed", weighted=True)
        self.assertTrue((weighted.to_numpy() == matrix.to_numpy()).all())
        with self.assertRaises(TypeError):
            pgdl.metrics(self.conn, self.model, "py_points", "x")

    def test_errors_carry_the_servers_sqlstate(self):
        self.sqlstate("22003", pgdl.predict, self.conn, self.model, np.full(16, np.nan, np.float32))
        self.sqlstate("22003", pgdl.predict_batch, self.conn, self.model, np.full((2, 16), np.inf))
        self.sqlstate("2202E", pgdl.predict, self.conn, self.model, np.ones(3, np.float32))
        self.sqlstate("42704", pgdl.model_weights, self.conn, 10 ** 15)
        self.sqlstate("42704", pgdl.predict_class, self.conn, "Robert'); DROP TABLE py_points; --", self.X[0])
        self.sqlstate("42602", pgdl.fit, self.conn, 'x"; DROP TABLE py_points; --', SPEC, progress=False)
        self.sqlstate("42704", pgdl.fit, self.conn, "py_points_packed", "no'such\"arch", progress=False)
        self.sqlstate("22004", pgdl.fit, self.conn, None, SPEC, progress=False)
        self.sqlstate("2202E", pgdl.model_from_weights, self.conn, SPEC, {"0.weight": np.ones((32, 16))})
        self.assertEqual(self.conn.execute("SELECT count(*) FROM py_points").fetchone(), (2000,))
        self.assertIsNone(pgdl.predict(self.conn, self.model, None))		# STRICT: NULL in, NULL out
        self.assertIsNone(pgdl.predict_class(self.conn, self.model, None))
        with self.assertRaises(TypeError):
            pgdl.predict(self.conn, 1.5, self.X[0])


class FitProgressTest(Fixture):
    def test_fit_bar_follows_progress_without_notices(self):
        """pgdl.progress_interval = -1: no epoch NOTICE reaches the client, and the bar still moves."""
        self.conn.execute("DROP TABLE IF EXISTS py_fitp, py_fitp_packed CASCADE")
        self.conn.execute("CREATE TABLE py_fitp AS SELECT i, x, (x[1] > 0)::int AS label FROM "
                          "(SELECT i, array_agg(sin(i * j * 0.37 + j)::real ORDER BY j) x "
                          "FROM generate_series(1, 8000) i, generate_series(1, 16) j GROUP BY i) s")
        self.conn.execute("SELECT pgdl.pack('py_fitp', 'x', 'label', 'py_fitp_packed', buffer_rows => 20, "
                          "partitions => 2)")
        self.conn.execute("SET pgdl.progress_interval = -1")
        notices = []
        self.conn.add_notice_handler(lambda diag: notices.append(diag.message_primary))
        epochs, bar = 60, RecordingBar()
        try:
            # a step per row of a wider network, so that the fit lasts long enough (seconds) for the bar's
            # own connection to see it in flight on a fast, idle machine too
            model = pgdl.fit(self.conn, "py_fitp_packed", {"input": [16], "layers": [
                {"type": "dense", "units": 256}, {"type": "relu"}, {"type": "dense", "units": 2}]},
                {"lr": 0.002, "batch_size": 1}, epochs=epochs, bar=bar, poll_seconds=0.02)
        finally:
            self.conn.execute("RESET pgdl.progress_interval")
        self.assertIsInstance(model, int)
        self.assertEqual([n for n in notices if n.startswith("epoch ")], [])
        self.assertEqual((bar.n, bar.total), (epochs, epochs))
        self.assertTrue(any(0 < n < epochs for n in bar.history),
                        f"pgdl.progress was seen while the fit trained: {bar.history}")
        self.assertEqual(bar.history, sorted(bar.history))
        self.assertIn("loss", bar.postfix)
        self.assertEqual([t for t in threading.enumerate() if t.name == "pgdl-progress"], [])


class FitMultipleTest(Fixture):
    def test_fit_multiple_follows_progress(self):
        self.conn.execute("DROP TABLE IF EXISTS py_mop, py_mop_packed CASCADE")
        self.conn.execute("CREATE TABLE py_mop AS SELECT i, x, (x[1] > 0)::int AS label FROM "
                          "(SELECT i, array_agg(sin(i * j * 0.37 + j)::real ORDER BY j) x "
                          "FROM generate_series(1, 2000) i, generate_series(1, 16) j GROUP BY i) s")
        self.conn.execute("SELECT pgdl.pack('py_mop', 'x', 'label', 'py_mop_packed', buffer_rows => 20, "
                          "partitions => 2)")
        self.conn.execute("DELETE FROM pgdl.architectures WHERE name = 'py_mop_arch'")	# and its configs
        arch = self.conn.execute("SELECT pgdl.add_architecture('py_mop_arch', %s)", [psycopg.types.json.Jsonb(
            {"input": [16], "layers": [{"type": "dense", "units": 8}, {"type": "relu"},
                                       {"type": "dense", "units": 2}]})]).fetchone()[0]
        self.conn.execute("INSERT INTO pgdl.configs (set_name, architecture, config) "
                          "SELECT 'py_selection', %s, pgdl.validate_config(jsonb_build_object('lr', lr)) "
                          "FROM unnest(ARRAY[0.01, 0.02, 0.05]) lr", [arch])
        epochs = 100
        bar = RecordingBar()
        run, board = pgdl.fit_multiple(self.conn, "py_mop_packed", "py_selection", epochs=epochs, workers=2,
                                       bar=bar, poll_seconds=0.02)
        self.assertEqual(len(board), 3)
        self.assertEqual(board["rank"].tolist(), [1, 2, 3])
        self.assertEqual(self.conn.execute("SELECT kind, status FROM pgdl.runs WHERE id = %s", [run]).fetchone(),
                         ("fit_multiple", "finished"))
        self.assertEqual((bar.n, bar.total), (3 * epochs, 3 * epochs))
        self.assertTrue(any(0 < n < 3 * epochs for n in bar.history),
                        f"pgdl.progress was seen while the run trained: {bar.history}")
        self.assertEqual(bar.history, sorted(bar.history))
        df = pgdl.run_metrics(self.conn, run)
        self.assertEqual(len(df), 3 * epochs)
        self.assertEqual(len(pgdl.plot_training_curves(df).axes[0].lines), 3)
        self.sqlstate("42704", pgdl.fit_multiple, self.conn, "py_mop_packed", "no'such\"set", epochs=1,
                     bar=RecordingBar())
        self.assertEqual([t for t in threading.enumerate() if t.name == "pgdl-progress"], [])


def pgdl_name(conn, model):
    """A name for a model that has none."""
    name = f"py_model_{model}"
    conn.execute("UPDATE pgdl.models SET name = %s WHERE id = %s AND name IS NULL", [name, model])
    return name


if __name__ == "__main__":
    unittest.main()
