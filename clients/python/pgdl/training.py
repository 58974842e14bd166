"""pgdl.fit and pgdl.fit_multiple with a progress bar.

Both bars follow the view pgdl.progress, polled from a second connection while the call runs: pgdl.fit's row
(kind 'fit', the calling backend's pid) gives its epoch, phase, loss and rows/s; pgdl.fit_multiple's rows
give each model's epoch.  The per-epoch NOTICEs (as many as pgdl.progress_interval lets through) are not
read, so the bar moves whatever that setting and client_min_messages say.
"""
import threading
import warnings
from collections import namedtuple
from collections.abc import Mapping

import psycopg
from psycopg import sql
from tqdm import tqdm

from ._sql import call, cursor, frame, json_arg, relation
from .selection import ConfigSet

_FINISHED = ("done", "stopped", "diverged")
_FIT_DEFAULT_EPOCHS = 10		# pgdl.fit's epochs DEFAULT


def fit(conn, source, architecture, config=None, epochs=None, validation=None, name=None, *,
        progress=True, bar=None, monitor=None, poll_seconds=0.25):
    """Train one configuration with pgdl.fit; returns the model id.

    `source`, `validation`: packed tables (names or Datasets). `architecture`: a stored architecture's name
    (str) or a spec (a mapping). `config`: a mapping or JSON text. Arguments left None take pgdl.fit's
    defaults. `progress`: show a tqdm bar of epochs, which
    follows pgdl.progress, polled every `poll_seconds` from `monitor` (a connection or a conninfo string;
    by default a new connection with conn's parameters); `bar`: a tqdm-like object to advance instead of
    a new one.
    """
    source, validation = relation(source), relation(validation)
    arch = ("%s::jsonb", json_arg(architecture)) if isinstance(architecture, Mapping) else ("%s::text", architecture)
    text, params = call("fit", [("%s::regclass", source), arch],
                        {"config": json_arg(config), "epochs": epochs, "validation": validation, "name": name})
    bar = _bar(bar, progress, total=epochs or _FIT_DEFAULT_EPOCHS, desc=f"fit {source}", unit="epoch")
    watcher = _watch(_FitWatcher, "pgdl.fit", conn, monitor, bar, poll_seconds, conn.info.backend_pid) \
        if bar is not None else None
    try:
        with cursor(conn) as cur:
            cur.execute(sql.SQL("SELECT {}").format(text), params)
            model = cur.fetchone()[0]
        if watcher is not None:
            watcher.stop()
        if bar is not None:
            _complete_fit(conn, bar, model)
        return model
    finally:
        if watcher is not None:
            watcher.stop()
        if bar is not None:
            bar.close()


Selection = namedtuple("Selection", "run leaderboard")


def fit_multiple(conn, source, configs, epochs=None, validation=None, *, rank_by=None, folds=None, deploy=None,
                 progress=True, bar=None, monitor=None, poll_seconds=0.25, **options):
    """Train every configuration of a set with pgdl.fit_multiple.

    `source` and `validation`: packed tables (names or Datasets); `configs`: a set's name or a ConfigSet.
    Returns Selection(run id, leaderboard DataFrame: pgdl.fit_multiple's rows, best first), which unpacks
    as a pair. `rank_by` (a metric), `folds` (cross-validation) and `deploy` (a deployment name for the
    best model) are passed only when given; `options`: the function's other arguments by their SQL names
    (workers, strategy, eta, name_prefix, ...). With `progress`, a bar of model-epochs (configurations x
    epochs) follows pgdl.progress, polled every `poll_seconds` from `monitor`: a connection or a conninfo
    string, by default a new connection with conn's parameters.
    """
    source, validation = relation(source), relation(validation)
    configs = configs.name if isinstance(configs, ConfigSet) else configs
    text, params = call("fit_multiple", [("%s::regclass", source), ("%s::text", configs)],
                        {"epochs": epochs, "validation": validation, "rank_by": rank_by, "folds": folds,
                         "deploy": deploy, **options})
    bar = _bar(bar, progress, total=None, desc=f"fit_multiple {configs}", unit="model-epoch")
    watcher = _watch(_RunWatcher, "pgdl.fit_multiple", conn, monitor, bar, poll_seconds, source) \
        if bar is not None else None
    try:
        with cursor(conn) as cur:
            cur.execute(sql.SQL("SELECT * FROM {}").format(text), params)
            board = frame(cur)
        run = _run_of(conn, board)
        if watcher is not None:
            watcher.stop()
        if bar is not None and run is not None:
            _complete(conn, bar, run, len(board))
        return Selection(run, board)
    finally:
        if watcher is not None:
            watcher.stop()
        if bar is not None:
            bar.close()


def _watch(kind, function, conn, monitor, bar, poll_seconds, what):
    try:
        return kind(conn, monitor, bar, poll_seconds, what)
    except psycopg.Error as e:		# no second connection: train without following
        warnings.warn(f"{function}: cannot follow pgdl.progress: {e}", RuntimeWarning, stacklevel=3)
        return None


def _run_of(conn, board):
    """The run of a leaderboard: its models' run, or with folds (no model per row) the newest run of its
    first configuration, which this call has just trained."""
    if board.empty:
        return None
    models = board["model"].dropna()
    with cursor(conn) as cur:
        if len(models):
            cur.execute("SELECT run FROM pgdl.models WHERE id = %s", [int(models.iloc[0])])
        else:
            cur.execute("SELECT max(run) FROM pgdl.run_metrics WHERE config = %s", [int(board["config"].iloc[0])])
        row = cur.fetchone()
    return None if row is None else row[0]


def _complete(conn, bar, run, models):
    """Bring the bar to its end: the last epochs may end between two polls, or before the first."""
    with cursor(conn) as cur:		# cross-validation: a model per configuration and fold
        cur.execute("SELECT epochs, (SELECT count(*) FROM pgdl.models WHERE run = %s) FROM pgdl.runs "
                    "WHERE id = %s", [run, run])
        epochs, stored = cur.fetchone()
        bar.total = max(models, stored) * epochs
    bar.update(bar.total - bar.n)


def _complete_fit(conn, bar, model):
    """Bring the bar to the epochs the fit trained (fewer than asked when it stopped early or diverged)."""
    with cursor(conn) as cur:
        cur.execute("SELECT count(*), (array_agg(train_loss ORDER BY epoch DESC))[1] FROM pgdl.run_metrics "
                    "WHERE model = %s AND node IS NULL", [model])
        trained, loss = cur.fetchone()
    if loss is not None:
        bar.set_postfix_str(f"loss {loss:.4f}", refresh=False)
    if bar.total is None or trained > bar.total:
        bar.total = trained
    bar.update(trained - bar.n)


def _bar(bar, progress, **kwargs):
    if bar is not None or not progress:
        return bar
    return tqdm(**kwargs)


def progress_done(rows, epochs):
    """Model-epochs done, from pgdl.progress rows (state, epoch, partitions_done) of one run.

    `epoch` is the epoch a model is in (1-based); a finished model (done, stopped by successive
    halving, or diverged) counts all its epochs, since it will train no more.
    """
    return sum(epochs if state in _FINISHED else epoch - 1 for state, epoch, _ in rows)


class _ProgressWatcher:
    """Polls pgdl.progress from a second connection in a thread and advances `bar` (_poll, per call kind)."""

    def __init__(self, conn, monitor, bar, poll_seconds, what):
        self.bar, self.poll_seconds = bar, poll_seconds
        self.error = None
        self._own = not isinstance(monitor, psycopg.Connection)
        self._conn = self._connect(conn, monitor) if self._own else monitor
        self._start(what)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgdl-progress", daemon=True)
        self._thread.start()

    @staticmethod
    def _connect(conn, monitor):
        if isinstance(monitor, str):
            return psycopg.connect(monitor, autocommit=True)
        extra = {"password": conn.info.password} if conn.info.password else {}
        return psycopg.connect(conn.info.dsn, autocommit=True, **extra)

    def _run(self):
        try:
            while not self._stop.wait(self.poll_seconds):
                self._poll()
        except psycopg.Error as e:
            self.error = e			# the bar stops; the fit goes on
        finally:
            if self._own:
                self._conn.close()

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


class _RunWatcher(_ProgressWatcher):
    """pgdl.fit_multiple: the newest run on `source`'s dataset that started after the watcher did."""

    def _start(self, source):
        self.source, self.seen_run = source, None
        with self._conn.cursor() as cur:
            cur.execute("SELECT coalesce(max(id), 0) FROM pgdl.runs")
            self._after = cur.fetchone()[0]

    def _poll(self):
        with self._conn.cursor() as cur:
            cur.execute(
                "SELECT p.run, r.epochs, p.state, p.epoch, p.partitions_done FROM pgdl.progress p "
                "JOIN pgdl.runs r ON r.id = p.run "
                "WHERE p.run > %s AND r.kind = 'fit_multiple' "
                "AND r.dataset = (SELECT id FROM pgdl.datasets WHERE packed = to_regclass(%s)) "
                "ORDER BY p.run, p.config", [self._after, self.source])
            rows = cur.fetchall()
        if not rows:
            return
        run, epochs = rows[0][0], rows[0][1]
        mine = [r[2:] for r in rows if r[0] == run]
        self.seen_run = run
        self.bar.total = len(mine) * epochs
        self.bar.update(progress_done(mine, epochs) - self.bar.n)


def fit_epochs_done(epoch, phase):
    """Epochs pgdl.fit has finished, from its pgdl.progress row: `epoch` is the one it is in (1-based),
    finished once its training is (validating, storing)."""
    return epoch if phase in ("validating", "storing") else epoch - 1


class _FitWatcher(_ProgressWatcher):
    """pgdl.fit: the row of kind 'fit' of the backend that runs it (its pid)."""

    def _start(self, pid):
        self.pid = pid

    def _poll(self):
        with self._conn.cursor() as cur:
            cur.execute("SELECT epoch, phase, last_loss, images_per_second FROM pgdl.progress "
                        "WHERE kind = 'fit' AND pid = %s", [self.pid])
            row = cur.fetchone()
        if row is None or row[0] is None:
            return
        done = fit_epochs_done(row[0], row[1])
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)
        figures = [f"loss {row[2]:.4f}"] if row[2] is not None else []
        figures += [f"{row[3]:.0f} rows/s"] if row[3] is not None else []
        if figures:
            self.bar.set_postfix_str(", ".join(figures), refresh=True)
