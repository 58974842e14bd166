-- Several servers: a coordinator and its nodes (postgres_fdw foreign servers, reached over libpq).

CREATE FUNCTION pgdl.train_partitions(model bytea, config jsonb, packed regclass, parts integer[],
		epochs integer DEFAULT 1, prefix bytea DEFAULT NULL)
	RETURNS TABLE (model bytea, examples bigint, loss_sum double precision, correct bigint, n bigint,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_train_partitions' LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.train_partitions(bytea, jsonb, regclass, integer[], integer, bytea) IS
	'trains a model on partitions of a packed table of this server, in the order given, epochs times, through its frozen layers (prefix) if it has some, as a model hopper worker does: what a coordinator runs on its nodes; returns the model and what it measured';

CREATE FUNCTION pgdl.distribute(packed regclass, servers text[], replicas integer DEFAULT 1) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_distribute' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.distribute(regclass, text[], integer) IS
	'moves the partitions of a packed table onto nodes (postgres_fdw servers), partition k to servers[k % n], leaving foreign tables in their place; with replicas r, copies of partition k also go to servers[(k + 1) % n] .. servers[(k + r - 1) % n], each checksummed, recorded in pgdl.partition_replicas, where a model hopper run goes on when a node is lost; a partition already moved stays, so calling again finishes an interrupted call, without copying again what a node already holds (same rows, by checksum); copies it made that the table no longer reads are dropped on the nodes; returns the partitions this call moved';

-- Where the copies of a partition other than the one its foreign table reads live (pgdl.distribute's
-- replicas): the node's table has the name of the partition here, on another server.  A row is written
-- only once the node's copy has the checksum of the partition as sent.
CREATE TABLE pgdl.partition_replicas (
	packed regclass NOT NULL,				-- the coordinator's distributed packed table
	part integer NOT NULL CHECK (part >= 0),
	replica integer NOT NULL CHECK (replica > 0),	-- 1: the first a run turns to, on servers[(part + 1) % n]
	server text NOT NULL,					-- the foreign server of the node
	remote_schema text NOT NULL,			-- the node's table, its two parts as they are
	remote_table text NOT NULL,
	checksum text NOT NULL,					-- rows and md5 of the rows as sent, verified on the node
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	created timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (packed, part, replica),
	UNIQUE (packed, part, server)
);
COMMENT ON TABLE pgdl.partition_replicas IS
	'replicas of the partitions of distributed packed tables (pgdl.distribute with replicas): per partition the servers beyond its foreign table''s that hold a checksummed copy, in the order a model hopper run turns to them';
SELECT pg_catalog.pg_extension_config_dump('pgdl.partition_replicas', '');
GRANT SELECT, INSERT ON pgdl.partition_replicas TO PUBLIC;
-- UPDATE by column (for the FOR UPDATE of pgdl_catalog_delete), never of the table: see 70_owners.sql
GRANT UPDATE (checksum, created) ON pgdl.partition_replicas TO PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON pgdl.partition_replicas TO pgdl_admin;
ALTER TABLE pgdl.partition_replicas ENABLE ROW LEVEL SECURITY;
-- a row is written by the owner of the packed table only: another role's runs trust it
CREATE POLICY owners ON pgdl.partition_replicas USING (pgdl.acts_as(owner))
	WITH CHECK (pgdl.acts_as(owner) AND pg_catalog.pg_has_role(
		(SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = packed), 'USAGE'));
CREATE POLICY readers ON pgdl.partition_replicas FOR SELECT
	USING (pg_catalog.has_table_privilege(packed, 'SELECT'));
COMMENT ON POLICY owners ON pgdl.partition_replicas IS 'the role that distributed the table (or pgdl_admin) reads and changes its replicas; only an owner of the packed table records one';
COMMENT ON POLICY readers ON pgdl.partition_replicas IS 'whoever may read the packed table reads where its replicas are, for the runs that train on it';

CREATE FUNCTION pgdl.add_node(packed regclass, server text) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_add_node' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.add_node(regclass, text) IS
	'moves partitions of a distributed packed table onto a new node (a postgres_fdw server the table does not use), copy then swap as pgdl.distribute does: of the m partitions pgdl.distribute put on s servers the new one gets floor(m / (s + 1)), each the highest-numbered partition of the server then holding the most; nothing else moves; the old copies are dropped by the next pgdl.distribute or pgdl.add_node of the table; returns the partitions moved';

CREATE FUNCTION pgdl.fit_federated(source regclass, architecture text, config jsonb DEFAULT '{}',
		rounds integer DEFAULT 10, local_epochs integer DEFAULT 1, validation regclass DEFAULT NULL,
		name text DEFAULT NULL, min_sites integer DEFAULT NULL, clip double precision DEFAULT NULL,
		noise_multiplier double precision DEFAULT NULL, delta double precision DEFAULT 1e-5)
	RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_fit_federated' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit_federated(regclass, text, jsonb, integer, integer, regclass, text, integer,
									   double precision, double precision, double precision) IS
	'federated averaging over the sites of a distributed packed table (the partitions each server holds): each round every site trains a copy of the model on its own partitions in seeded order, local_epochs times, and the copies are averaged weighted by their examples; only models leave a site; each round is committed with a checkpoint (pgdl.resume continues a failed run); min_sites lets a round go on without sites that are down; clip and noise_multiplier make the average differentially private (each site''s update clipped, Gaussian noise added; the privacy spent per round in pgdl.run_metrics.federation, epsilon at delta); stores the model and returns its id';

CREATE FUNCTION pgdl.average_models(models bytea[], examples bigint[]) RETURNS bytea
	AS 'MODULE_PATHNAME', 'pgdl_average_models' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.average_models(bytea[], bigint[]) IS
	'the average of models of one architecture weighted by the examples each trained on, folded in array order as pgdl.fit_federated averages its sites (and the pgdl.train aggregate its partial models)';

-- Federating: each node packs its own rows with the coordinator's classes and normalization.

CREATE FUNCTION pgdl.export_dataset(packed regclass) RETURNS jsonb
	LANGUAGE sql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS
$$
	SELECT jsonb_build_object('task', d.task, 'n_features', d.n_features, 'n_targets', d.n_targets,
							  'classes', to_jsonb(d.classes), 'label_type', d.label_type::text,
							  'normalization', d.normalization, 'partitions', d.partitions, 'n_rows', d.n_rows)
		   -- the vocabularies only when there are some: a description without them reads as before
		   || CASE WHEN d.categorical IS NOT NULL THEN jsonb_build_object('categorical', d.categorical) ELSE '{}' END
		   || CASE WHEN d.imputation IS NOT NULL THEN jsonb_build_object('imputation', d.imputation) ELSE '{}' END
	  FROM pgdl.datasets d WHERE d.packed = export_dataset.packed
$$;
COMMENT ON FUNCTION pgdl.export_dataset(regclass) IS
	'what a packed table''s rows mean (task, features, targets, classes, label type, normalization, vocabularies of categorical columns, imputation), as jsonb: pgdl.import_dataset on another server makes it a reference for pgdl.pack there';

-- No SET search_path: the table goes where the caller's CREATE TABLE would put it (its first schema).
CREATE FUNCTION pgdl.import_dataset(description jsonb, name text) RETURNS regclass
	LANGUAGE plpgsql VOLATILE STRICT PARALLEL UNSAFE AS
$$
DECLARE
	schema name := (pg_catalog.current_schemas(false))[1];
	made regclass;
	label_regtype regtype;
BEGIN
	IF pg_catalog.jsonb_typeof(description) IS DISTINCT FROM 'object'
	   OR pg_catalog.jsonb_typeof(description->'task') IS DISTINCT FROM 'string'
	   OR pg_catalog.jsonb_typeof(description->'n_features') IS DISTINCT FROM 'number'
	   OR pg_catalog.jsonb_typeof(description->'n_targets') IS DISTINCT FROM 'number'
	   OR pg_catalog.jsonb_typeof(description->'classes') NOT IN ('array', 'null')
	   OR pg_catalog.jsonb_typeof(description->'label_type') IS DISTINCT FROM 'string'
	   OR pg_catalog.jsonb_typeof(description->'normalization') IS DISTINCT FROM 'object' THEN
		RAISE EXCEPTION 'invalid dataset description'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'A description is what pgdl.export_dataset returns: an object with task, n_features, n_targets, classes, label_type and normalization.';
	END IF;
	-- checked before the casts, whose errors would echo the value (a number of any length)
	IF (description->>'n_features') !~ '^[1-9][0-9]{0,8}$' OR (description->>'n_targets') !~ '^[1-9][0-9]{0,8}$' THEN
		RAISE EXCEPTION 'invalid dataset description'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'Its n_features and n_targets must be positive integers.';
	END IF;
	-- a type name is parsed as SQL: any error of it (syntax, no such type or schema) is the description's
	BEGIN
		label_regtype := (description->>'label_type')::regtype;
	EXCEPTION
		WHEN OTHERS THEN
			RAISE EXCEPTION 'invalid label_type "%" in dataset description', pg_catalog.left(description->>'label_type', 64)
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = 'It must name a type of this server, as pgdl.export_dataset writes it.';
	END;
	IF schema IS NULL THEN
		RAISE EXCEPTION 'no schema to create "%" in', pg_catalog.left(name, 64) USING ERRCODE = 'invalid_schema_name';
	END IF;
	IF pg_catalog.octet_length(name) > 60 OR name = '' THEN
		RAISE EXCEPTION 'invalid table name "%"', pg_catalog.left(name, 64)
			USING ERRCODE = 'invalid_name', DETAIL = 'The name must be 1 to 60 bytes long.';
	END IF;
	EXECUTE pg_catalog.format('CREATE TABLE %I.%I (part integer NOT NULL, buffer_id integer NOT NULL, n integer NOT NULL,'
				   ' x real[] NOT NULL, y real[] NOT NULL, PRIMARY KEY (part, buffer_id)) PARTITION BY LIST (part)',
				   schema, name);
	made := pg_catalog.format('%I.%I', schema, name)::regclass;
	EXECUTE pg_catalog.format('CREATE TABLE %I.%I PARTITION OF %s FOR VALUES IN (0)', schema, name || '_p0', made);
	INSERT INTO pgdl.datasets (packed, source, features, label, task, n_features, n_targets, classes, label_type,
							   normalization, n_rows, n_buffers, buffer_rows, partitions, seed, categorical, imputation)
	VALUES (made, 'pgdl.import_dataset', '', '', description->>'task', (description->>'n_features')::integer,
			(description->>'n_targets')::integer,
			CASE WHEN pg_catalog.jsonb_typeof(description->'classes') = 'array'
				 THEN ARRAY(SELECT pg_catalog.jsonb_array_elements_text(description->'classes')) END,
			label_regtype, description->'normalization', 0, 0, 1, 1, 0,
			CASE WHEN pg_catalog.jsonb_typeof(description->'categorical') = 'array' THEN description->'categorical' END,
			CASE WHEN pg_catalog.jsonb_typeof(description->'imputation') = 'object' THEN description->'imputation' END);
	RETURN made;
END
$$;
COMMENT ON FUNCTION pgdl.import_dataset(jsonb, text) IS
	'an empty packed table with the classes and normalization of a dataset that pgdl.export_dataset described on another server: give it as reference => to pgdl.pack, so that a node packs its own rows as the coordinator''s';

CREATE FUNCTION pgdl.attach_partitions(packed regclass, server text, remote_packed text) RETURNS integer
	AS 'MODULE_PATHNAME', 'pgdl_attach_partitions' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.attach_partitions(regclass, text, text) IS
	'adds the partitions of a packed table on a node (packed there with reference => pgdl.import_dataset of this one''s description) as partitions of a packed table here, foreign tables over the node''s: its rows never leave the node; returns the partitions added';

-- Feature caches on the nodes of a distributed packed table (node_cache.c).  A node keeps the outputs of
-- frozen layers over a table it holds in a table of its schema pgdl_cache that the caller owns, names it
-- itself and stamps it with the layers' hash and the table's pgdl.packed_version; the coordinator
-- records each in pgdl.node_feature_cache.  A row is a record, never a pointer: the planner refuses one
-- that names another relation than the node's own cache.
CREATE FUNCTION pgdl.node_feature_cache(prefix bytea, packed regclass, build boolean DEFAULT false)
	RETURNS TABLE (cache text, action text, version text, bytes bigint)
	AS 'MODULE_PATHNAME', 'pgdl_node_feature_cache' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.node_feature_cache(bytea, regclass, boolean) IS
	'on a node: the caller''s cache of the outputs of frozen layers (prefix, a model blob) over a packed table of this server, in pgdl_cache: what it needs (reuse, materialize, refresh, rebuild; recompute for a table with row-level security) and, with build, made so; what a coordinator''s pgdl.fit_multiple runs on its nodes; returns the cache''s name, the action, the table''s version and the cache''s bytes';

CREATE TABLE pgdl.node_feature_cache (
	id bigserial PRIMARY KEY,
	source regclass NOT NULL,				-- the coordinator's distributed packed table
	server text NOT NULL,					-- the foreign server of the node
	remote_table text NOT NULL,				-- the node's table (qualified, quoted) the cache computed
	base_model bigint,						-- the model whose first `depth` layers computed it
	base_hash text NOT NULL,				-- SHA-256 of those layers: pgdl.prefix_hash
	depth integer NOT NULL CHECK (depth > 0),
	cache text NOT NULL,					-- the node's table in its schema pgdl_cache
	source_version text NOT NULL,			-- pgdl.packed_version of the node's table when computed
	bytes bigint NOT NULL,
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	created timestamptz NOT NULL DEFAULT now(),
	last_used timestamptz NOT NULL DEFAULT now(),
	UNIQUE (source, server, remote_table, depth, owner)
);
COMMENT ON TABLE pgdl.node_feature_cache IS
	'feature caches on the nodes of distributed packed tables: per node table, frozen prefix and role, the node''s table of its outputs and the version it was computed from';
SELECT pg_catalog.pg_extension_config_dump('pgdl.node_feature_cache', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.node_feature_cache_id_seq', '');
GRANT SELECT, INSERT ON pgdl.node_feature_cache TO PUBLIC;
-- a rebuild updates its row in place: UPDATE by column, since DELETE (or UPDATE of the table) would let
-- any role LOCK the table in modes that block everyone's planner
GRANT UPDATE (base_model, base_hash, cache, source_version, bytes, created, last_used) ON pgdl.node_feature_cache TO PUBLIC;
GRANT USAGE ON SEQUENCE pgdl.node_feature_cache_id_seq TO PUBLIC;
ALTER TABLE pgdl.node_feature_cache ENABLE ROW LEVEL SECURITY;
CREATE POLICY owners ON pgdl.node_feature_cache USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
COMMENT ON POLICY owners ON pgdl.node_feature_cache IS 'the owner of a node''s feature cache (or pgdl_admin) reads and changes its row';

CREATE OR REPLACE FUNCTION pgdl.feature_cache_bytes() RETURNS bigint
	LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ SELECT (SELECT coalesce(sum(f.bytes), 0) FROM pgdl.feature_cache f)::bigint
		+ (SELECT coalesce(sum(n.bytes), 0) FROM pgdl.node_feature_cache n)::bigint $$;
COMMENT ON FUNCTION pgdl.feature_cache_bytes() IS
	'bytes that all feature caches (every role''s, on this server and on the nodes) take, against pgdl.feature_cache_budget';
