-- Several servers: a coordinator and its nodes (postgres_fdw foreign servers, reached over libpq).

CREATE FUNCTION pgdl.train_partitions(model bytea, config jsonb, packed regclass, parts integer[],
		epochs integer DEFAULT 1)
	RETURNS TABLE (model bytea, examples bigint, loss_sum double precision, correct bigint, n bigint,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_train_partitions' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.train_partitions(bytea, jsonb, regclass, integer[], integer) IS
	'trains a model on partitions of a packed table of this server, in the order given, epochs times, as a model hopper worker does: what a coordinator runs on its nodes; returns the model and what it measured';

CREATE FUNCTION pgdl.distribute(packed regclass, servers text[]) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_distribute' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.distribute(regclass, text[]) IS
	'moves the partitions of a packed table onto nodes (postgres_fdw servers), partition k to servers[k % n], leaving foreign tables in their place; a partition already moved stays, so calling again finishes an interrupted call; returns the partitions this call moved';
