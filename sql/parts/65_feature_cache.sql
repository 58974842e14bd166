-- Transfer learning and materialized feature layers: configurations that freeze the first layers of a
-- stored base model share those layers' outputs, kept in materialized views in schema pgdl_cache.

CREATE SCHEMA pgdl_cache;
COMMENT ON SCHEMA pgdl_cache IS
	'feature caches of pgdl.fit_multiple: materialized views of frozen layers'' outputs, owned by the users who built them';
-- Caches belong to the users who built them; nobody else is granted anything on them.  Only the
-- schema's owner may create in it: a role that could would take or plant the name of a view another
-- role's build is about to make.  The worker that builds a cache makes its view as the schema's owner
-- and gives it to the caller at once (feature_cache.c, pgdl_cache_create_view).
GRANT USAGE ON SCHEMA pgdl_cache TO PUBLIC;

CREATE TABLE pgdl.feature_cache (
	id bigserial PRIMARY KEY,
	dataset bigint NOT NULL REFERENCES pgdl.datasets ON DELETE CASCADE,
	source regclass NOT NULL,				-- the packed table whose buffers it holds the features of
	base_model bigint,						-- the model whose first `depth` layers computed them
	base_hash text NOT NULL,				-- SHA-256 of those layers (spec and weights): pgdl.prefix_hash
	depth integer NOT NULL CHECK (depth > 0),
	staged_from bigint,						-- computed from this shallower cache (no foreign key: 20_catalog.sql)
	view regclass NOT NULL UNIQUE,			-- the materialized view in pgdl_cache
	owner regrole NOT NULL DEFAULT quote_ident(current_user)::regrole,
	rows bigint NOT NULL,
	bytes bigint NOT NULL,
	created timestamptz NOT NULL DEFAULT now(),
	refreshed timestamptz NOT NULL DEFAULT now(),
	last_used timestamptz NOT NULL DEFAULT now(),
	source_version text NOT NULL,			-- pgdl.packed_version(source) when it was computed
	valid boolean NOT NULL DEFAULT true		-- false once its base model changed (its source: see source_version)
);
CREATE INDEX ON pgdl.feature_cache (dataset, depth);
CREATE TRIGGER feature_cache_staged_from AFTER DELETE ON pgdl.feature_cache REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.forget_deleted_rows('staged_from');
COMMENT ON TABLE pgdl.feature_cache IS
	'feature caches: per packed table and frozen prefix of a base model, the materialized view of its outputs, its size, use and validity';
SELECT pg_catalog.pg_extension_config_dump('pgdl.feature_cache', '');
SELECT pg_catalog.pg_extension_config_dump('pgdl.feature_cache_id_seq', '');
GRANT SELECT, INSERT ON pgdl.feature_cache TO PUBLIC;	-- UPDATE by column: 70_owners.sql
GRANT USAGE ON SEQUENCE pgdl.feature_cache_id_seq TO PUBLIC;

-- The storage of every role's caches, for pgdl.feature_cache_budget, which is for all of them: as the
-- extension's owner, since row-level security shows each role only its own.
CREATE FUNCTION pgdl.feature_cache_bytes() RETURNS bigint
	LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ SELECT coalesce(sum(f.bytes), 0)::bigint FROM pgdl.feature_cache f $$;
COMMENT ON FUNCTION pgdl.feature_cache_bytes() IS
	'bytes that all feature caches (every role''s) take, against pgdl.feature_cache_budget';

-- Staleness.  A cache records the version of its packed table (a hash of its rows' ctid and xmin, which
-- every INSERT, UPDATE, DELETE, TRUNCATE and re-pack changes) and is stale when the table's differs;
-- pgdl.fit_multiple checks before it uses a cache, so no trigger goes on users' tables.  A change to a
-- base model's weights marks its caches stale at once.
CREATE FUNCTION pgdl.packed_version(packed regclass) RETURNS text
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	rel record;
	v text;
BEGIN
	-- a regclass argument may be any oid: a dropped table's, or 0
	SELECT n.nspname, c.relname INTO rel
	  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = packed::oid;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'relation with OID % does not exist', packed::oid USING ERRCODE = 'undefined_table';
	END IF;
	EXECUTE format('SELECT md5(coalesce(string_agg(tableoid::text || ctid::text || xmin::text, '','' '
				   'ORDER BY tableoid, ctid), '''')) FROM %I.%I', rel.nspname, rel.relname) INTO v;
	RETURN v;
END
$$;
COMMENT ON FUNCTION pgdl.packed_version(regclass) IS
	'the version of a packed table: it changes with any change to its rows; feature caches of another version are stale';

-- As the extension's owner, since every role's caches of the model go stale: so only as the trigger
-- of pgdl.models, where OLD.id is a model's id.
CREATE FUNCTION pgdl.base_model_changed() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	IF TG_RELID <> 'pgdl.models'::regclass OR TG_WHEN <> 'AFTER' OR TG_LEVEL <> 'ROW'
	   OR TG_OP NOT IN ('UPDATE', 'DELETE') THEN
		RAISE EXCEPTION 'pgdl.base_model_changed() may only be fired by pgdl.models, AFTER UPDATE OR DELETE FOR EACH ROW'
			USING ERRCODE = 'trigger_protocol_violated',
				  DETAIL = format('It was fired by table "%s".', left(TG_TABLE_NAME, 64));
	END IF;
	UPDATE pgdl.feature_cache SET valid = false WHERE base_model = OLD.id AND valid;
	RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION pgdl.base_model_changed() FROM PUBLIC;
COMMENT ON FUNCTION pgdl.base_model_changed() IS
	'trigger on pgdl.models: marks the feature caches computed by a model stale when its weights change or it is deleted';
CREATE TRIGGER models_feature_cache AFTER UPDATE OF weights OR DELETE ON pgdl.models
	FOR EACH ROW EXECUTE FUNCTION pgdl.base_model_changed();

-- A dropped packed table takes its pgdl.datasets row with it, a dropped cache view its
-- pgdl.feature_cache row, whoever drops them: as the extension's owner, since the rows need not be
-- the dropping role's (70_owners.sql).  The models trained on the table lose their dataset (ON DELETE
-- SET NULL) and with it the preprocessing they read rows with: their origin says so first, so that
-- they refuse to predict (pgdl_check_model_preprocessing) rather than take rows as given, as a model
-- that never had a dataset (an ONNX import, a blob) does.
CREATE FUNCTION pgdl.forget_dropped_relations() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	UPDATE pgdl.models m
	   SET origin = CASE WHEN jsonb_typeof(m.origin) = 'object' THEN m.origin ELSE '{}' END
					|| jsonb_build_object('dataset_dropped', jsonb_build_object('dataset', d.id, 'packed', o.object_identity))
	  FROM pgdl.datasets d, pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = d.packed::oid AND m.dataset = d.id;
	DELETE FROM pgdl.datasets d
	 USING pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = d.packed::oid;
	DELETE FROM pgdl.feature_cache f
	 USING pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = f.view::oid;
END
$$;
COMMENT ON FUNCTION pgdl.forget_dropped_relations() IS
	'event trigger: removes the pgdl.datasets rows of dropped packed tables (marking the origin of the models trained on them) and the pgdl.feature_cache rows of dropped cache views';
REVOKE EXECUTE ON FUNCTION pgdl.forget_dropped_relations() FROM PUBLIC;
CREATE EVENT TRIGGER pgdl_forget_dropped_relations ON sql_drop
	EXECUTE FUNCTION pgdl.forget_dropped_relations();

-- What cache views are made of.  A network on a buffer of examples: COST 50000 (per call, or per row
-- returned), some fifty per-row predictions.

CREATE FUNCTION pgdl.prefix_hash(model bigint, layers integer) RETURNS text
	AS 'MODULE_PATHNAME', 'pgdl_prefix_hash_sql' LANGUAGE C STABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION pgdl.prefix_hash(bigint, integer) IS
	'SHA-256 (hex) of a stored model''s first layers, spec and weights: equal for equal frozen prefixes, the key of feature caches';

-- Row-level security on: a cache view is refreshed as its owner, who reads the base model under the
-- catalog's policies, also when a restore (which sets row_security off) refreshes it.
CREATE FUNCTION pgdl.cache_features(base bigint, from_layer integer, to_layer integer, base_hash text,
		x real[], n integer) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_cache_features' LANGUAGE C STABLE STRICT PARALLEL SAFE COST 50000
	SET row_security = on;
COMMENT ON FUNCTION pgdl.cache_features(bigint, integer, integer, text, real[], integer) IS
	'internal, the rows of feature cache views: layers [from_layer, to_layer) of a base model on a buffer of n examples; an error if the base''s first to_layer layers no longer hash to base_hash';

-- pgdl.features: the output of a network's first layers.

CREATE FUNCTION pgdl.features(model bigint, layer integer, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_features' LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.features(model text, layer integer, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_features' LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
CREATE FUNCTION pgdl.features(model bytea, layer integer, x real[]) RETURNS real[]
	AS 'MODULE_PATHNAME', 'pgdl_features' LANGUAGE C STABLE STRICT PARALLEL SAFE COST 1000;
COMMENT ON FUNCTION pgdl.features(bigint, integer, real[]) IS
	'outputs of the first `layer` layers of stored model (by id) for one example (raw features, normalized as for pgdl.predict), in inference mode';
COMMENT ON FUNCTION pgdl.features(text, integer, real[]) IS
	'outputs of the first `layer` layers of stored model (by name) for one example (raw features, normalized as for pgdl.predict), in inference mode';
COMMENT ON FUNCTION pgdl.features(bytea, integer, real[]) IS
	'outputs of the first `layer` layers of a model blob for one example (features used as given), in inference mode';

-- A packed table is one with a pgdl.datasets row and a pg_class row (a forged dataset row may name a
-- dropped table); a model name that does not exist is echoed cut, not 10 MB of it.
CREATE FUNCTION pgdl.features_batch(model bigint, layer integer, source regclass)
	RETURNS TABLE (part integer, buffer_id integer, n integer, x real[], y real[])
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE COST 50000 AS
$$
DECLARE
	h text;
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pgdl.datasets d JOIN pg_catalog.pg_class c ON c.oid = d.packed WHERE d.packed = features_batch.source) THEN
		RAISE EXCEPTION 'relation "%" is not a packed table', features_batch.source
			USING ERRCODE = 'wrong_object_type', HINT = 'Pack a table with pgdl.pack() first.';
	END IF;
	h := pgdl.prefix_hash(model, layer);
	RETURN QUERY EXECUTE format(
		'SELECT part, buffer_id, n, pgdl.cache_features($1, 0, $2, $3, x, n), y FROM %s ORDER BY part, buffer_id',
		features_batch.source) USING model, layer, h;
END
$$;
CREATE FUNCTION pgdl.features_batch(model text, layer integer, source regclass)
	RETURNS TABLE (part integer, buffer_id integer, n integer, x real[], y real[])
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE COST 50000 AS
$$
DECLARE
	id bigint;
BEGIN
	id := pgdl.model_id(model);
	IF id IS NULL THEN
		RAISE EXCEPTION 'model "%" does not exist', CASE WHEN length(model) > 64 THEN left(model, 64) || '...' ELSE model END USING ERRCODE = 'undefined_object';
	END IF;
	RETURN QUERY SELECT * FROM pgdl.features_batch(id, layer, features_batch.source);
END
$$;
COMMENT ON FUNCTION pgdl.features_batch(bigint, integer, regclass) IS
	'pgdl.features over a packed table: per buffer of a packed table (part, buffer_id, n, y as packed), the outputs of stored model''s first `layer` layers, as a feature cache holds them';
COMMENT ON FUNCTION pgdl.features_batch(text, integer, regclass) IS
	'pgdl.features over a packed table: per buffer of a packed table (part, buffer_id, n, y as packed), the outputs of stored model''s first `layer` layers, as a feature cache holds them';

-- Planning and housekeeping.

CREATE FUNCTION pgdl.explain_fit_multiple(source regclass, configs text, epochs integer DEFAULT 10,
		validation regclass DEFAULT NULL, workers integer DEFAULT NULL, strategy text DEFAULT 'all',
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto',
		workers_per_node integer DEFAULT 1)
	RETURNS TABLE ("group" integer, source regclass, base_model bigint, frozen_layers integer, configs integer,
				   action text, cache text, validation_cache text, staged_from text, gflops double precision,
				   storage_mb double precision, predicted_seconds double precision, reason text,
				   prefix_gflops_per_pass double precision, memory_mb double precision, basis text,
				   predictions jsonb)
	AS 'MODULE_PATHNAME', 'pgdl_explain_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.explain_fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text, integer) IS
	'the plan of pgdl.fit_multiple with the same arguments, without running it: per group of configurations sharing a frozen prefix, the feature cache to reuse, build, refresh or rebuild (or recompute), with predicted compute, storage, time and memory, and each configuration''s predicted pace';

CREATE FUNCTION pgdl.drop_feature_cache(cache regclass) RETURNS void
	LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	-- the catalog is writable by all: only materialized views in pgdl_cache are caches
	IF NOT EXISTS (SELECT 1 FROM pgdl.feature_cache f JOIN pg_class c ON c.oid = f.view
				    WHERE f.view = cache AND c.relkind = 'm' AND c.relnamespace = 'pgdl_cache'::regnamespace) THEN
		RAISE EXCEPTION '"%" is not a feature cache', cache
			USING ERRCODE = 'wrong_object_type', HINT = 'The caches are listed in pgdl.feature_cache.';
	END IF;
	-- deeper caches computed from it go with it
	EXECUTE format('DROP MATERIALIZED VIEW %s CASCADE', cache);
END
$$;
COMMENT ON FUNCTION pgdl.drop_feature_cache(regclass) IS
	'drops a feature cache view (and the caches staged from it) and its pgdl.feature_cache row';

CREATE FUNCTION pgdl.cleanup_feature_cache(unused_for interval DEFAULT '7 days') RETURNS integer
	LANGUAGE plpgsql STRICT SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	c record;
	dropped integer := 0;
BEGIN
	FOR c IN SELECT f.view FROM pgdl.feature_cache f JOIN pg_class r ON r.oid = f.view
			  WHERE f.owner = quote_ident(current_user)::regrole AND (NOT f.valid OR f.last_used < now() - unused_for)
			    AND r.relkind = 'm' AND r.relnamespace = 'pgdl_cache'::regnamespace
				AND r.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
			  ORDER BY f.depth DESC
	LOOP
		-- an earlier CASCADE may have taken it already
		IF EXISTS (SELECT 1 FROM pgdl.feature_cache f WHERE f.view = c.view) THEN
			EXECUTE format('DROP MATERIALIZED VIEW %s CASCADE', c.view);
			dropped := dropped + 1;
		END IF;
	END LOOP;
	RETURN dropped;
END
$$;
COMMENT ON FUNCTION pgdl.cleanup_feature_cache(interval) IS
	'drops the caller''s feature caches that are stale or unused for the given interval; returns how many';
