"""The whole path from Python: a DataFrame into a table, pack, evaluate, a selection, deployments and explanations.

Against the server that test_client.py uses (PGHOST, ...); tables are named py_svc_*.
"""
import datetime
import decimal
import io
import math

import numpy as np
import pandas as pd
import psycopg
from matplotlib.axes import Axes

import pgdl
from test_client import Fixture, RecordingBar, SETUP, SPEC


def points_frame(n=600, seed=3):
    """n rows of 8 named features, a class 0..2 that depends on them, and the class as a word."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    label = (X[:, 0] > 0).astype(int) + (X[:, 1] + X[:, 2] > 0.5).astype(int)
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(8)])
    df["label"] = label
    df["word"] = pd.Categorical(np.array(["low", "middle", "high"])[label])
    return df


class ToTableTest(Fixture):
    def everything(self):
        return pd.DataFrame({
            "f64": [1 / 3, np.nan, -1e300],
            "f32": np.array([0.1, np.inf, np.nan], dtype=np.float32),
            "i64": np.array([2 ** 62, -1, 0], dtype=np.int64),
            "i32": np.array([7, -2 ** 31, 2 ** 31 - 1], dtype=np.int32),
            "i8": np.array([1, -128, 127], dtype=np.int8),
            "u32": np.array([2 ** 32 - 1, 0, 1], dtype=np.uint32),
            "u64": np.array([2 ** 64 - 1, 0, 5], dtype=np.uint64),
            "nullable": pd.array([1, None, 3], dtype="Int64"),
            "flag": [True, False, True],
            "maybe": pd.array([True, None, False], dtype="boolean"),
            "text": ["plain", None, "it's \"quoted\"\\back\tslash\nline é"],
            "cat": pd.Categorical(["a", None, "b"]),
            "image": [np.array([[1.5, -0.0], [np.nan, 2.0]], dtype=np.float32), [1, 2, 3], None],
            "mixed": [1, 2.5, None],
            "when": pd.to_datetime(["2024-02-29 12:34:56.789012", None, "1999-12-31"]),
            "zoned": pd.to_datetime(["2024-02-29 12:00", "2000-01-01", None]).tz_localize("UTC"),
        })

    def test_every_dtype_round_trips(self):
        df = self.everything()
        t = pgdl.to_table(self.conn, df, "py_svc_types", if_exists="replace")
        self.assertEqual((t.name, t.rows), ('"py_svc_types"', 3))
        types = dict(self.conn.execute(
            "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass "
            "AND attnum > 0 ORDER BY attnum", [t.name]).fetchall())
        self.assertEqual(types, {
            "f64": "double precision", "f32": "real", "i64": "bigint", "i32": "integer", "i8": "integer",
            "u32": "bigint", "u64": "numeric", "nullable": "bigint", "flag": "boolean", "maybe": "boolean",
            "text": "text", "cat": "text", "image": "real[]", "mixed": "double precision",
            "when": "timestamp without time zone", "zoned": "timestamp with time zone"})
        self.assertEqual(t.columns["image"], "real[]")
        with self.conn.cursor(binary=True) as cur:		# binary: real as its float32 value
            rows = cur.execute("SELECT * FROM py_svc_types ORDER BY i64 DESC").fetchall()
        first, last, middle = rows
        self.assertEqual(first[:6], (1 / 3, float(np.float32(0.1)), 2 ** 62, 7, 1, 2 ** 32 - 1))
        self.assertEqual(first[6], decimal.Decimal(2 ** 64 - 1))
        self.assertEqual((first[7], first[8], first[9], first[10], first[11]), (1, True, True, "plain", "a"))
        self.assertEqual(first[12].tolist(), [1.5, 0.0, None, 2.0])		# NaN element -> NULL element
        self.assertTrue(first[12].mask.tolist() == [False, False, True, False])
        self.assertEqual(first[14], datetime.datetime(2024, 2, 29, 12, 34, 56, 789012))
        self.assertEqual(first[15], datetime.datetime(2024, 2, 29, 12, tzinfo=datetime.timezone.utc))
        self.assertEqual(middle[12].tolist(), [1, 2, 3])
        self.assertEqual(middle[13], 2.5)
        self.assertEqual(last[2:4], (0, 2 ** 31 - 1))
        self.assertEqual(last[10], "it's \"quoted\"\\back\tslash\nline é")
        self.assertIsNone(last[12])
        # NaN, None, NA and NaT are NULL; infinities are values
        nulls = self.conn.execute(
            "SELECT count(*) FILTER (WHERE f64 IS NULL), count(*) FILTER (WHERE f32 IS NULL), "
            "count(*) FILTER (WHERE f32 = 'Infinity'), count(*) FILTER (WHERE nullable IS NULL), "
            "count(*) FILTER (WHERE maybe IS NULL), count(*) FILTER (WHERE text IS NULL), "
            "count(*) FILTER (WHERE cat IS NULL), count(*) FILTER (WHERE \"when\" IS NULL), "
            "count(*) FILTER (WHERE zoned IS NULL), count(*) FILTER (WHERE mixed IS NULL) FROM py_svc_types"
        ).fetchone()
        self.assertEqual(nulls, (1, 1, 1, 1, 1, 1, 1, 1, 1, 1))

    def test_names_are_identifiers(self):
        self.conn.execute('DROP SCHEMA IF EXISTS "py svc\'s ""schema""" CASCADE')
        self.conn.execute('CREATE SCHEMA "py svc\'s ""schema"""')
        self.conn.execute("CREATE TABLE IF NOT EXISTS py_svc_canary ()")
        odd = 'we"ird\\ col; DROP TABLE py_svc_canary; --'
        df = pd.DataFrame({odd: [1.0, 2.0], "Label": [0, 1]})
        t = pgdl.to_table(self.conn, df, ("py svc's \"schema\"", 'ta"ble\\1'), features=[odd], label="Label")
        self.assertEqual(t.name, '"py svc\'s ""schema"""."ta""ble\\1"')
        self.assertEqual(t.features, '"we""ird\\ col; DROP TABLE py_svc_canary; --"')
        self.assertEqual(t.label, '"Label"')
        back = self.conn.execute(f'SELECT {t.features}, {t.label} FROM {t.name} ORDER BY 1').fetchall()
        self.assertEqual(back, [(1.0, 0), (2.0, 1)])
        # a string follows SQL's rules: schema-qualified, unquoted parts folded to lower case
        self.conn.execute("DROP TABLE IF EXISTS public.py_svc_folded")
        t = pgdl.to_table(self.conn, df, 'public.PY_SVC_Folded')
        self.assertEqual(t.name, '"public"."py_svc_folded"')
        t = pgdl.to_table(self.conn, df, '"py svc\'s ""schema""".MixedCase', if_exists="replace")
        self.assertEqual(self.conn.execute("SELECT count(*) FROM \"py svc's \"\"schema\"\"\".mixedcase").fetchone(),
                         (2,))
        self.conn.execute("DROP TABLE public.py_svc_folded")
        self.assertEqual(self.conn.execute("SELECT to_regclass('py_svc_canary') IS NOT NULL").fetchone(), (True,))
        with self.assertRaises(ValueError):
            pgdl.to_table(self.conn, df, "a.b.c")
        self.sqlstate("22023", pgdl.to_table, self.conn, df, 'no"closing')

    def test_if_exists(self):
        df = pd.DataFrame({"x": [1.5, 2.5], "n": [1, 2]})
        self.conn.execute("DROP TABLE IF EXISTS py_svc_modes")
        self.assertEqual(pgdl.to_table(self.conn, df, "py_svc_modes").rows, 2)
        self.sqlstate("42P07", pgdl.to_table, self.conn, df, "py_svc_modes")
        self.assertEqual(pgdl.to_table(self.conn, df, "py_svc_modes", if_exists="append").rows, 2)
        self.assertEqual(self.conn.execute("SELECT count(*), sum(n) FROM py_svc_modes").fetchone(), (4, 6))
        # append casts to the table's types: an int column into a double precision one
        pgdl.to_table(self.conn, pd.DataFrame({"x": [7]}), "py_svc_modes", if_exists="append")
        self.assertEqual(self.conn.execute("SELECT x, n FROM py_svc_modes WHERE x = 7").fetchone(), (7.0, None))
        # a column the table's cannot take by assignment (text into integer) appends nothing
        self.sqlstate("42804", pgdl.to_table, self.conn, pd.DataFrame({"n": ["seven"]}), "py_svc_modes",
                      if_exists="append")
        self.assertEqual(self.conn.execute("SELECT count(*) FROM py_svc_modes").fetchone(), (5,))
        replaced = pgdl.to_table(self.conn, pd.DataFrame({"s": ["a"]}), "py_svc_modes", if_exists="replace")
        self.assertEqual((replaced.rows, replaced.columns), (1, {"s": "text"}))
        self.assertEqual(self.conn.execute("SELECT * FROM py_svc_modes").fetchall(), [("a",)])
        self.conn.execute("DROP TABLE py_svc_modes")
        self.assertEqual(pgdl.to_table(self.conn, df, "py_svc_modes", if_exists="append").rows, 2)
        left = self.conn.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'pgdl_client_%'").fetchone()
        self.assertEqual(left, (0,), "the scratch table of append is gone")
        empty = pgdl.to_table(self.conn, df.iloc[:0], "py_svc_modes", if_exists="replace")
        self.assertEqual((empty.rows, self.conn.execute("SELECT count(*) FROM py_svc_modes").fetchone()), (0, (0,)))

    def test_client_side_checks(self):
        df = pd.DataFrame({"x": [1.0]})
        with self.assertRaises(ValueError):
            pgdl.to_table(self.conn, df, "py_svc_bad", if_exists="overwrite")
        with self.assertRaises(TypeError):
            pgdl.to_table(self.conn, {"x": [1.0]}, "py_svc_bad")
        with self.assertRaisesRegex(TypeError, "complex128"):
            pgdl.to_table(self.conn, pd.DataFrame({"z": [1j]}), "py_svc_bad")
        with self.assertRaisesRegex(TypeError, "mixes"):
            pgdl.to_table(self.conn, pd.DataFrame({"m": ["a", 1]}), "py_svc_bad")
        with self.assertRaisesRegex(TypeError, "holds a dict"):
            pgdl.to_table(self.conn, pd.DataFrame({"m": [{"a": 1}]}), "py_svc_bad")
        with self.assertRaisesRegex(ValueError, "out of range for type real"):
            pgdl.to_table(self.conn, pd.DataFrame({"a": [np.array([1e300])]}), "py_svc_bad")
        with self.assertRaisesRegex(ValueError, "repeat"):
            pgdl.to_table(self.conn, pd.DataFrame([[1, 2]], columns=["a", "a"]), "py_svc_bad")
        with self.assertRaises(KeyError):
            pgdl.to_table(self.conn, df, "py_svc_bad", features=["nope"])
        with self.assertRaises(KeyError):
            pgdl.to_table(self.conn, df, "py_svc_bad", label="nope")
        self.assertEqual(self.conn.execute("SELECT to_regclass('py_svc_bad')").fetchone(), (None,))


class PackAndSelectTest(Fixture):
    """A DataFrame through to_table, pack, fit, evaluate, grid_search and fit_multiple."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.conn.execute("DROP TABLE IF EXISTS py_svc_points_packed, py_svc_test_packed CASCADE")
        cls.df = points_frame()
        cls.features = [f"f{j}" for j in range(8)]
        cls.table = pgdl.to_table(cls.conn, cls.df.iloc[:500], "py_svc_points", features=cls.features,
                                  label="label", if_exists="replace")
        cls.test_table = pgdl.to_table(cls.conn, cls.df.iloc[500:], "py_svc_test", features=cls.features,
                                       label="label", if_exists="replace")
        cls.data = pgdl.pack(cls.conn, cls.table, "py_svc_points_packed", buffer_rows=50, partitions=2,
                             standardize=True)
        cls.test = pgdl.pack(cls.conn, cls.test_table, "py_svc_test_packed", partitions=1, reference=cls.data)
        cls.spec = {"input": [8], "layers": [{"type": "dense", "units": 16}, {"type": "relu"},
                                             {"type": "dense", "units": 3}]}
        cls.model = pgdl.fit(cls.conn, cls.data, cls.spec, {"lr": 0.1, "momentum": 0.9}, epochs=3, progress=False)

    def test_pack_returns_the_dataset(self):
        d = self.data
        self.assertIsInstance(d, pgdl.Dataset)
        row = self.conn.execute("SELECT id, packed::text, features, label, task, n_rows, n_features, classes, "
                                "label_type::text, n_buffers, partitions, normalization ? 'mean', weighted "
                                "FROM pgdl.datasets WHERE packed = 'py_svc_points_packed'::regclass").fetchone()
        self.assertEqual((d.id, d.packed, d.features, d.label, d.task, d.n_rows, d.n_features, d.classes,
                          d.label_type, d.n_buffers, d.partitions, "mean" in d.normalization, d.weighted), row)
        self.assertEqual((d.n_rows, d.n_features, d.classes, d.label_type), (500, 8, ["0", "1", "2"], "bigint"))
        self.assertEqual(d.features, ", ".join(f'"f{j}"' for j in range(8)))
        self.assertEqual(pgdl.dataset(self.conn, d.id), d)
        self.assertEqual(pgdl.dataset(self.conn, "py_svc_points_packed"), d)
        self.assertEqual(self.test.n_rows, 100)
        with self.assertRaises(LookupError):
            pgdl.dataset(self.conn, "py_svc_points")
        with self.assertRaises(TypeError):
            pgdl.pack(self.conn, "py_svc_points", "py_svc_never")
        self.sqlstate("42P07", pgdl.pack, self.conn, self.table, "py_svc_points_packed")
        self.sqlstate("22023", pgdl.pack, self.conn, self.table, "py_svc_never", partitions=2, scale=0.5,
                      standardize=True)

    def test_evaluate_as_the_server_gives_it(self):
        got = pgdl.evaluate(self.conn, self.model, self.test)
        self.assertIsInstance(got, pgdl.Evaluation)
        sql_row = self.conn.execute("SELECT loss, accuracy, n FROM pgdl.evaluate(%s::bigint, "
                                    "'py_svc_test_packed'::regclass)", [self.model]).fetchone()
        self.assertEqual((got.loss, got.accuracy, got.n), sql_row)
        self.assertEqual(got.n, 100)
        raw = pgdl.evaluate(self.conn, self.model, self.test_table)		# the Table brings its columns
        self.assertEqual(raw, got, "raw rows preprocessed as packed give the packed table's numbers")
        query = pgdl.evaluate(self.conn, self.model, "SELECT * FROM py_svc_test", self.test_table.features, "label")
        self.assertEqual(query, got)
        scores = pgdl.metrics(self.conn, self.model, self.test)
        self.assertAlmostEqual(scores.query("metric == 'accuracy'")["value"].item(), got.accuracy, places=12)
        self.sqlstate("42P01", pgdl.evaluate, self.conn, self.model, "py_svc_no_such_table")

    def test_grid_search_and_fit_multiple(self):
        self.conn.execute("DELETE FROM pgdl.architectures WHERE name = 'py_svc_arch'")
        self.conn.execute("SELECT pgdl.add_architecture('py_svc_arch', %s)", [psycopg.types.json.Jsonb(self.spec)])
        grid = pgdl.grid_search(self.conn, "py_svc_grid", "py_svc_arch", {"lr": [0.02, 0.1], "momentum": [0, 0.9]})
        self.assertIsInstance(grid, pgdl.ConfigSet)
        self.assertEqual((grid.name, grid.added, len(grid.configs)), ("py_svc_grid", 4, 4))
        rows = self.conn.execute("SELECT c.id, c.config FROM pgdl.configs c WHERE set_name = 'py_svc_grid' "
                                 "ORDER BY id").fetchall()
        self.assertEqual(grid.configs["id"].tolist(), [r[0] for r in rows])
        self.assertEqual(grid.configs["config"].tolist(), [r[1] for r in rows])
        self.assertEqual(set(grid.configs["architecture"]), {"py_svc_arch"})
        self.assertEqual(sorted((c["lr"], c["momentum"]) for c in grid.configs["config"]),
                         [(0.02, 0), (0.02, 0.9), (0.1, 0), (0.1, 0.9)])
        again = pgdl.grid_search(self.conn, "py_svc_grid", ["py_svc_arch"], {"lr": [0.02, 0.1], "momentum": [0, 0.9]})
        self.assertEqual((again.added, len(again.configs)), (0, 4))
        drawn = [pgdl.random_search(self.conn, name, ["py_svc_arch"], {"lr": {"log_uniform": [0.001, 0.1]}}, 3,
                                    seed=5) for name in ("py_svc_random_a", "py_svc_random_b")]
        self.assertEqual([d.added for d in drawn], [3, 3])
        self.assertEqual(drawn[0].configs["config"].tolist(), drawn[1].configs["config"].tolist())
        self.sqlstate("42704", pgdl.grid_search, self.conn, "py_svc_grid", ["py_svc_no_arch"], {"lr": 0.1})

        bar = RecordingBar()
        selection = pgdl.fit_multiple(self.conn, self.data, grid, epochs=2, validation=self.test, workers=2,
                                      rank_by="accuracy", bar=bar)
        self.assertIsInstance(selection, pgdl.Selection)
        run, board = selection
        self.assertEqual(board["rank"].tolist(), [1, 2, 3, 4])
        self.assertEqual(sorted(board["config"]), grid.configs["id"].tolist())
        accuracy = board["validation_accuracy"].tolist()
        self.assertEqual(accuracy, sorted(accuracy, reverse=True), "ranked by accuracy")
        ranked_by = self.conn.execute("SELECT DISTINCT ranked_by FROM pgdl.leaderboard WHERE run = %s",
                                      [run]).fetchall()
        self.assertEqual(ranked_by, [("validation_accuracy",)])
        self.assertEqual((bar.n, bar.total), (8, 8))

        folds = pgdl.fit_multiple(self.conn, self.data, "py_svc_grid", epochs=1, folds=True, workers=2,
                                  bar=RecordingBar())
        self.assertTrue(folds.leaderboard["model"].isna().all(), "a cross-validation has no model per row")
        cv = self.conn.execute("SELECT count(*), min(folds) FROM pgdl.cross_validation WHERE run = %s",
                               [folds.run]).fetchone()
        self.assertEqual(cv, (4, 2))


class DeploymentTest(Fixture):
    """pgdl.deploy, rollback, drop_deployment, grants and the view pgdl.deployments."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.conn.execute(SETUP)
        cls.conn.execute("SELECT pgdl.drop_deployment(name) FROM pgdl.deployments "
                         "WHERE name LIKE 'py_svc_%' GROUP BY name")
        cls.conn.execute("SELECT pgdl.delete_rows('pgdl.models', "
                         "ARRAY(SELECT id FROM pgdl.models WHERE name = 'py_svc_second'))")
        cls.first = pgdl.fit(cls.conn, "py_points_packed", SPEC, {"lr": 0.05}, epochs=1, progress=False)
        cls.second = pgdl.fit(cls.conn, "py_points_packed", SPEC, {"lr": 0.05, "seed": 9}, epochs=2,
                              name="py_svc_second", progress=False)
        cls.x = cls.conn.execute("SELECT x FROM py_points ORDER BY i LIMIT 1").fetchone()[0]

    def test_deploy_rollback_history(self):
        first = pgdl.deploy(self.conn, "py_svc_churn", self.first)
        self.assertIsInstance(first, pgdl.Deployment)
        self.assertEqual((first.name, first.model, first.version, first.active), ("py_svc_churn", self.first, 1, True))
        self.assertIsInstance(first.deployed_at, datetime.datetime)
        self.assertEqual(first.deployed_by, self.conn.execute("SELECT current_user").fetchone()[0])
        self.assertEqual(pgdl.predict(self.conn, "py_svc_churn", self.x).tobytes(),
                         pgdl.predict(self.conn, self.first, self.x).tobytes())
        second = pgdl.deploy(self.conn, "py_svc_churn", "py_svc_second")	# by the model's name
        self.assertEqual((second.model, second.version, second.model_name), (self.second, 2, "py_svc_second"))
        self.assertEqual(pgdl.predict(self.conn, "py_svc_churn", self.x).tobytes(),
                         pgdl.predict(self.conn, self.second, self.x).tobytes())
        history = pgdl.deployments(self.conn, "py_svc_churn")
        self.assertEqual(history["version"].tolist(), [1, 2])
        self.assertEqual(history["model"].tolist(), [self.first, self.second])
        self.assertEqual(history["active"].tolist(), [False, True])
        back = pgdl.rollback(self.conn, "py_svc_churn")
        self.assertEqual((back.model, back.active), (self.first, True))
        self.assertEqual(pgdl.predict_class(self.conn, "py_svc_churn", self.x),
                         pgdl.predict_class(self.conn, self.first, self.x))
        after = pgdl.deployments(self.conn, "py_svc_churn")
        self.assertEqual(after.loc[after["model"] == self.second, "rolled_back_by"].notna().tolist(), [True])
        self.assertIn("py_svc_churn", pgdl.deployments(self.conn)["name"].tolist())
        pgdl.drop_deployment(self.conn, "py_svc_churn")
        self.assertTrue(pgdl.deployments(self.conn, "py_svc_churn").empty)
        self.sqlstate("42704", pgdl.predict, self.conn, "py_svc_churn", self.x)
        self.sqlstate("42704", pgdl.deploy, self.conn, "py_svc_churn", 10 ** 15)
        with self.assertRaises(TypeError):
            pgdl.deploy(self.conn, "py_svc_churn", b"blob")

    def test_grant_and_revoke(self):
        self.conn.execute("DROP ROLE IF EXISTS py_svc_reader")
        self.conn.execute("CREATE ROLE py_svc_reader")
        pgdl.deploy(self.conn, "py_svc_shared", self.first)
        pgdl.grant_deployment(self.conn, "py_svc_shared", "py_svc_reader")
        self.conn.execute("GRANT USAGE ON SCHEMA pgdl TO py_svc_reader")
        try:
            self.conn.execute("SET ROLE py_svc_reader")
            self.assertEqual(pgdl.predict(self.conn, "py_svc_shared", self.x).tobytes(),
                             pgdl.predict(self.conn, self.first, self.x).tobytes())
            self.conn.execute("RESET ROLE")
            pgdl.revoke_deployment(self.conn, "py_svc_shared", "py_svc_reader")
            self.conn.execute("SET ROLE py_svc_reader")
            with self.assertRaises(psycopg.Error):
                pgdl.predict(self.conn, "py_svc_shared", self.x)
        finally:
            self.conn.execute("RESET ROLE")
            pgdl.drop_deployment(self.conn, "py_svc_shared")
            self.conn.execute("DROP OWNED BY py_svc_reader")
            self.conn.execute("DROP ROLE py_svc_reader")

    def test_fit_multiple_deploys_the_best(self):
        self.conn.execute("DELETE FROM pgdl.architectures WHERE name = 'py_svc_dep_arch'")
        self.conn.execute("SELECT pgdl.add_architecture('py_svc_dep_arch', %s)", [psycopg.types.json.Jsonb(SPEC)])
        grid = pgdl.grid_search(self.conn, "py_svc_dep", "py_svc_dep_arch", {"lr": [0.01, 0.05]})
        # the winner is scored against the served model on a validation table: here the training points
        run, board = pgdl.fit_multiple(self.conn, "py_points_packed", grid, epochs=1, workers=2,
                                       validation="py_points_packed", deploy="py_svc_best", progress=False)
        best = int(board.loc[board["rank"] == 1, "model"].item())
        live = pgdl.deployments(self.conn, "py_svc_best")
        self.assertEqual(live.loc[live["active"], "model"].tolist(), [best])
        pgdl.drop_deployment(self.conn, "py_svc_best")


class ExplainTest(Fixture):
    """pgdl.explain and pgdl.feature_importance, and the plots (which need no server)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.conn.execute(SETUP)
        cls.model = pgdl.fit(cls.conn, "py_points_packed", SPEC, {"lr": 0.05, "momentum": 0.9}, epochs=3,
                             progress=False)
        cls.X = np.stack([r[0] for r in cls.conn.execute("SELECT x FROM py_points ORDER BY i LIMIT 3")])

    def test_attributions_are_complete(self):
        """Integrated gradients: the attributions add up to the output's change from the baseline."""
        baseline = np.zeros(16)
        for x in self.X:
            target = pgdl.predict_class(self.conn, self.model, x)
            e = pgdl.explain(self.conn, self.model, x, target_class=target, baseline=baseline, steps=256)
            self.assertIsInstance(e, pgdl.Explanation)
            self.assertEqual(list(e.frame.columns), ["feature", "name", "value", "attribution"])
            self.assertEqual(e.frame["feature"].tolist(), list(range(1, 17)))
            self.assertEqual((e.attributions.shape, e.target_class), ((16,), str(target)))
            # the float the model read, as the double of its shortest decimal (0.864971, not 0.86497098...)
            np.testing.assert_allclose(e.values, x.astype(np.float64), rtol=1e-6, atol=0)
            change = (pgdl.predict(self.conn, self.model, x)[target]
                      - pgdl.predict(self.conn, self.model, baseline)[target])
            self.assertAlmostEqual(float(e.attributions.sum()), float(change), delta=0.02 * abs(change) + 2e-3)
        grid = pgdl.explain(self.conn, self.model, self.X[0].reshape(4, 4))
        self.assertEqual(grid.attributions.shape, (4, 4))
        self.assertTrue(np.isfinite(grid.attributions).all())
        self.sqlstate("2202E", pgdl.explain, self.conn, self.model, np.ones(3))
        self.sqlstate("22003", pgdl.explain, self.conn, self.model, np.full(16, np.nan))
        with self.assertRaises(TypeError):
            pgdl.explain(self.conn, self.model, np.array(["a"] * 16))

    def test_feature_importance(self):
        df = pgdl.feature_importance(self.conn, self.model, "SELECT x, label FROM py_points", "x", "label",
                                     repeats=2, seed=1)
        self.assertEqual(list(df.columns), ["feature", "name", "importance", "importance_std"])
        self.assertEqual(sorted(df["feature"]), list(range(1, 17)))
        self.assertTrue((df["importance_std"] >= 0).all())
        # the label depends on features 1 to 6 only: one of them matters most
        self.assertLessEqual(int(df.loc[df["importance"].idxmax(), "feature"]), 6)
        again = pgdl.feature_importance(self.conn, self.model, "py_points", "x", "label", repeats=2, seed=1)
        pd.testing.assert_frame_equal(df.sort_values("feature", ignore_index=True),
                                      again.sort_values("feature", ignore_index=True))
        ax = pgdl.plot_feature_importance(df, top=5)
        self.assertEqual(len(ax.patches), 5)
        with self.assertRaises(TypeError):
            pgdl.feature_importance(self.conn, self.model, "py_points")

    def test_plot_over_an_image(self):
        rng = np.random.default_rng(1)
        image, attributions = rng.random((28, 28)), rng.normal(size=784)
        ax = pgdl.plot_attributions(attributions, image=image.reshape(-1))
        self.assertIsInstance(ax, Axes)
        self.assertEqual(len(ax.images), 2, "the image in grey, the map over it")
        grey, heat = ax.images
        self.assertEqual((grey.get_cmap().name, grey.get_array().shape), ("gray", (28, 28)))
        low, high = heat.get_clim()
        self.assertEqual((low, high), (-np.abs(attributions).max(), np.abs(attributions).max()))
        opacity = np.sqrt(np.abs(attributions) / np.abs(attributions).max()) * 0.6
        np.testing.assert_allclose(heat.get_alpha(), opacity.reshape(28, 28))		# the largest at alpha
        np.testing.assert_array_equal(heat.get_array(), attributions.reshape(28, 28))
        png = io.BytesIO()
        ax.figure.savefig(png, format="png")
        self.assertEqual(png.getvalue()[:8], b"\x89PNG\r\n\x1a\n")
        alone = pgdl.plot_attributions(attributions.reshape(28, 28), colorbar=False)
        self.assertEqual((len(alone.images), alone.images[0].get_alpha()), (1, None))		# opaque
        rgb = pgdl.plot_attributions(rng.normal(size=3 * 64), image=rng.random(3 * 64), shape=(3, 8, 8))
        self.assertEqual(rgb.images[0].get_array().shape, (8, 8, 3))
        self.assertEqual(rgb.images[1].get_array().shape, (8, 8))
        e = pgdl.Explanation(1, "3", pd.DataFrame(), attributions.reshape(28, 28), image)
        self.assertEqual(len(pgdl.plot_attributions(e).images), 2)
        with self.assertRaisesRegex(ValueError, "do not fill"):
            pgdl.plot_attributions(attributions, shape=(27, 27))
        with self.assertRaisesRegex(ValueError, "channels"):
            pgdl.plot_attributions(rng.normal(size=4 * 4), shape=(4, 2, 2))
        self.assertTrue(math.isfinite(pgdl.plot_attributions(np.zeros(784)).images[0].get_clim()[1]))

    def test_plot_explanation_from_the_server(self):
        e = pgdl.explain(self.conn, self.model, self.X[0])
        ax = pgdl.plot_attributions(e, shape=(4, 4))
        self.assertEqual(len(ax.images), 2)
        np.testing.assert_allclose(ax.images[0].get_array(), self.X[0].reshape(4, 4), rtol=1e-6)
