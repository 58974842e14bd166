-- pgdl 0.3.0 to 0.4.0 (ALTER EXTENSION pgdl UPDATE): for the clients at the other end of libpq
-- (progress of every long call, typed predictions, streaming predict_batch, BI views).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.4.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.4.0'" to load this file. \quit

-- ---- Progress of every long call (pgdl.fit, pgdl.pack, pgdl.distribute, feature cache builds) ----
-- pgdl.progress_rows() gains columns at its end: it is made again, with the view on it.
DROP VIEW pgdl.progress;
DROP FUNCTION pgdl.progress_rows();
CREATE FUNCTION pgdl.progress_rows(OUT run bigint, OUT config bigint, OUT state text, OUT epoch integer,
		OUT partitions_done integer, OUT partition integer, OUT worker_pid integer,
		OUT images_per_second double precision, OUT seconds_left double precision,
		OUT last_loss double precision, OUT node text, OUT kind text, OUT phase text, OUT pid integer,
		OUT target regclass, OUT done bigint, OUT total bigint, OUT unit text,
		OUT call_seconds_left double precision)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_progress' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION pgdl.progress_rows() IS
	'the long calls of pgdl in flight: the models of pgdl.fit_multiple runs (from the runs'' shared memory), and pgdl.fit, pgdl.pack, pgdl.distribute and feature cache builds (from their backends'' progress slots); see the view pgdl.progress';
CREATE VIEW pgdl.progress AS SELECT * FROM pgdl.progress_rows();
COMMENT ON VIEW pgdl.progress IS
	'long calls in flight: per pgdl.fit_multiple model its state, epoch, partition and worker (and the node it trains on), images/s and estimated seconds left; per pgdl.fit, pgdl.pack, pgdl.distribute or feature cache build its phase, epoch, units done of the phase, rate and estimated seconds left for the whole call';
GRANT SELECT ON pgdl.progress TO PUBLIC;
