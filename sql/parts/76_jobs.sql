-- The server's queue of pgdl jobs (src/hopper/jobs.c): at most pgdl.max_workers pgdl workers train at once,
-- whoever started them; jobs that find none free wait their turn.
CREATE FUNCTION pgdl.job_rows(OUT pid integer, OUT owner regrole, OUT database text, OUT state text,
		OUT "position" integer, OUT workers integer, OUT queued_since timestamptz, OUT run bigint,
		OUT priority integer, OUT predicted_seconds_left double precision)
	RETURNS SETOF record
	AS 'MODULE_PATHNAME', 'pgdl_job_rows' LANGUAGE C VOLATILE PARALLEL RESTRICTED;
COMMENT ON FUNCTION pgdl.job_rows() IS
	'the pgdl.fit_multiple and pgdl.resume calls of every database of the server that hold or wait for pgdl worker slots, from the lock table, with their priority and the seconds their run has left as pgdl.estimate predicts them; see the view pgdl.jobs';

CREATE VIEW pgdl.jobs AS
SELECT j.pid, j.owner, j.database, j.state, j."position", j.priority, j.workers, j.queued_since, j.run,
	   p.configurations_left, p.seconds_left, j.predicted_seconds_left
  FROM pgdl.job_rows() j
  LEFT JOIN LATERAL (
	SELECT count(*) FILTER (WHERE g.state IN ('waiting', 'training', 'at rung'))::integer AS configurations_left,
		   sum(g.seconds_left) / greatest(j.workers, 1) AS seconds_left
	  FROM pgdl.progress g
	 WHERE g.run = j.run AND g.kind = 'fit_multiple'
  ) p ON j.run IS NOT NULL
 WHERE pgdl.acts_as(j.owner);
COMMENT ON VIEW pgdl.jobs IS
	'pgdl jobs (pgdl.fit_multiple and pgdl.resume calls) queued or running on this server, the caller''s own (all for pgdl_admin): state, place in the queue, priority among the owner''s jobs, workers held, the run, configurations left, seconds left at the pace measured so far and as predicted by the calibrated estimate';
GRANT SELECT ON pgdl.jobs TO PUBLIC;
