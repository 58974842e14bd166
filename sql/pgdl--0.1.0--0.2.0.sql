-- pgdl 0.1.0 to 0.2.0 (ALTER EXTENSION pgdl UPDATE).
--
-- What changed in the catalog between the two, in the order it is done below; regress/t/005_upgrade.pl
-- checks that an upgraded catalog equals a fresh 0.2.0 one (tables, columns and their order, defaults,
-- constraints, indexes, triggers, policies, functions, privileges, comments, the extension's members
-- and configuration tables) and that stored models predict the same bytes.
--
--  1. Schema pgdl becomes a member of the extension (0.2.0 makes it in its script; see 00_header.sql),
--     so that DROP EXTENSION takes it.
--  2. Every catalog table gets its `owner regrole` column, at its end (fresh installs have it there
--     too), and models their `acl aclitem[]`; names are unique per owner (architectures, models,
--     configuration sets); models get an index on dataset.
--  3. A row's reference to its own table (datasets.reference, models.parent, feature_cache.staged_from)
--     is no foreign key any more, which made pg_dump warn about circular foreign keys: a trigger
--     clears it when the row it names is deleted (pgdl.forget_deleted_rows).
--  4. One sql_drop event trigger (pgdl.forget_dropped_relations, as the extension's owner) replaces
--     pgdl.forget_dropped_datasets and pgdl.forget_dropped_caches; pgdl.feature_cache_bytes sums every
--     role's caches; pgdl.cache_features runs with row_security on (a restore refreshes cache views as
--     their owners); pgdl.features_batch(text, ...) and pgdl.cleanup_feature_cache resolve names and
--     owners as 0.2.0 does.
--  5. Owners, sharing and row-level security: role pgdl_admin, the functions, triggers and policies of
--     70_owners.sql, copied here as they are there.
--  6. 75_lifecycle.sql: pgdl.cleanup_checkpoints, pgdl.run_in_progress, the DROP EXTENSION notice.
--
-- Whose rows are the rows 0.1.0 wrote, which record no writer: a dataset is its packed table's
-- owner's (pgdl.pack made the table as the user who packed); feature caches already had owners; every
-- other row (architectures, models, runs and what they wrote, configurations) is the extension's
-- owner's (the role that ran CREATE EXTENSION pgdl): giving them to another role would guess, and
-- could give one user's model to another.  The extension's owner and pgdl_admin see them all and give
-- them away (docs/security.md, "Upgrading from 0.1.0").
--
-- The tables keep their rows: columns are added, not tables rebuilt, so that views and foreign keys of
-- users' own on the catalog stay.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.2.0'" to load this file. \quit

-- ---- 1. Schema pgdl, a member ----
--
-- 0.1.0's control file named schema pgdl, which PostgreSQL made outside the extension and records as the
-- extension's schema (pg_extension.extnamespace, and a dependency of the extension on it).  0.2.0 is
-- installed as pg_catalog's, with pgdl a member.  No command moves a non-relocatable extension, so the
-- two catalog rows are written as CREATE EXTENSION writes them for 0.2.0 (a dependency on pg_catalog,
-- which is pinned, is not recorded); then the schema can join the extension.
UPDATE pg_catalog.pg_extension SET extnamespace = 'pg_catalog'::regnamespace WHERE extname = 'pgdl';
DELETE FROM pg_catalog.pg_depend
 WHERE classid = 'pg_catalog.pg_extension'::regclass
   AND objid = (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname = 'pgdl')
   AND refclassid = 'pg_catalog.pg_namespace'::regclass AND refobjid = 'pgdl'::regnamespace
   AND deptype = 'n';
ALTER EXTENSION pgdl ADD SCHEMA pgdl;
COMMENT ON SCHEMA pgdl IS 'pgdl: deep learning as SQL (its functions and catalog)';

-- ---- 2. Owners ----
--
-- Added without a default, filled, then given the default and NOT NULL: a column added with a default
-- would keep it as its "missing value", which a fresh table has not.

-- datasets: the packed table's owner
ALTER TABLE pgdl.datasets DROP CONSTRAINT datasets_reference_fkey, ADD COLUMN owner regrole;
UPDATE pgdl.datasets d
   SET owner = coalesce((SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid = d.packed),
						(SELECT e.extowner FROM pg_catalog.pg_extension e WHERE e.extname = 'pgdl'))::regrole;
ALTER TABLE pgdl.datasets
	ALTER COLUMN owner SET DEFAULT quote_ident(current_user)::regrole, ALTER COLUMN owner SET NOT NULL;

-- the others: the extension's owner
ALTER TABLE pgdl.architectures ADD COLUMN owner regrole;
ALTER TABLE pgdl.runs ADD COLUMN owner regrole;
ALTER TABLE pgdl.models DROP CONSTRAINT models_parent_fkey, ADD COLUMN owner regrole, ADD COLUMN acl aclitem[];
ALTER TABLE pgdl.run_metrics ADD COLUMN owner regrole;
ALTER TABLE pgdl.configs ADD COLUMN owner regrole;
ALTER TABLE pgdl.checkpoints ADD COLUMN owner regrole;
-- the rows change but for their owner: configurations are not validated again (a base model may be gone)
ALTER TABLE pgdl.configs DISABLE TRIGGER configs_validate;
DO $$
DECLARE
	ext_owner regrole := (SELECT e.extowner FROM pg_catalog.pg_extension e WHERE e.extname = 'pgdl')::regrole;
	t text;
BEGIN
	FOREACH t IN ARRAY ARRAY['architectures', 'runs', 'models', 'run_metrics', 'configs', 'checkpoints'] LOOP
		EXECUTE format('UPDATE pgdl.%I SET owner = $1', t) USING ext_owner;
		EXECUTE format('ALTER TABLE pgdl.%I ALTER COLUMN owner SET DEFAULT quote_ident(current_user)::regrole, '
					   'ALTER COLUMN owner SET NOT NULL', t);
	END LOOP;
END
$$;
ALTER TABLE pgdl.configs ENABLE TRIGGER configs_validate;

-- names are per owner
ALTER TABLE pgdl.architectures DROP CONSTRAINT architectures_name_key, ADD UNIQUE (owner, name);
ALTER TABLE pgdl.models DROP CONSTRAINT models_name_key, ADD UNIQUE (owner, name);
ALTER TABLE pgdl.configs DROP CONSTRAINT configs_set_name_architecture_config_key,
	ADD UNIQUE NULLS NOT DISTINCT (owner, set_name, architecture, config);
CREATE INDEX ON pgdl.models (dataset);		-- who may read a dataset's row: 70_owners.sql

-- caches had their owner; its default quotes a role name that needs quoting
ALTER TABLE pgdl.feature_cache ALTER COLUMN owner SET DEFAULT quote_ident(current_user)::regrole,
	DROP CONSTRAINT feature_cache_staged_from_fkey;

-- ---- 3. References to a row of the same table (as in 20_catalog.sql) ----
-- A row that names another row of its own table (a dataset's reference, a model's parent) does so
-- without a foreign key: pg_dump loads the catalog's rows in the order their foreign keys allow, and a
-- table's key to itself is a loop it warns about ("circular foreign-key constraints").  Deleting a row
-- clears the names of it, as ON DELETE SET NULL did, in every role's rows: as the extension's owner.
CREATE FUNCTION pgdl.forget_deleted_rows() RETURNS trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	EXECUTE format('UPDATE %I.%I t SET %I = NULL WHERE t.%I IN (SELECT g.id FROM gone g)',
				   TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_ARGV[0], TG_ARGV[0]);
	RETURN NULL;
END
$$;
COMMENT ON FUNCTION pgdl.forget_deleted_rows() IS
	'trigger: sets to NULL the column (the argument) of the rows that named deleted rows of the same table';
CREATE TRIGGER datasets_reference AFTER DELETE ON pgdl.datasets REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.forget_deleted_rows('reference');
CREATE TRIGGER models_parent AFTER DELETE ON pgdl.models REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.forget_deleted_rows('parent');
CREATE TRIGGER feature_cache_staged_from AFTER DELETE ON pgdl.feature_cache REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION pgdl.forget_deleted_rows('staged_from');

-- ---- 4. Feature caches (as in 65_feature_cache.sql) ----

DROP EVENT TRIGGER pgdl_forget_dropped_datasets;
DROP FUNCTION pgdl.forget_dropped_datasets();
DROP EVENT TRIGGER pgdl_forget_dropped_caches;
DROP FUNCTION pgdl.forget_dropped_caches();

-- A dropped packed table takes its pgdl.datasets row with it, a dropped cache view its
-- pgdl.feature_cache row, whoever drops them: as the extension's owner, since the rows need not be
-- the dropping role's (70_owners.sql).
CREATE FUNCTION pgdl.forget_dropped_relations() RETURNS event_trigger
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	DELETE FROM pgdl.datasets d
	 USING pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = d.packed::oid;
	DELETE FROM pgdl.feature_cache f
	 USING pg_event_trigger_dropped_objects() o
	 WHERE o.classid = 'pg_class'::regclass AND o.objsubid = 0 AND o.objid = f.view::oid;
END
$$;
COMMENT ON FUNCTION pgdl.forget_dropped_relations() IS
	'event trigger: removes the pgdl.datasets rows of dropped packed tables and the pgdl.feature_cache rows of dropped cache views';
CREATE EVENT TRIGGER pgdl_forget_dropped_relations ON sql_drop
	EXECUTE FUNCTION pgdl.forget_dropped_relations();

-- The storage of every role's caches, for pgdl.feature_cache_budget, which is for all of them: as the
-- extension's owner, since row-level security shows each role only its own.
CREATE FUNCTION pgdl.feature_cache_bytes() RETURNS bigint
	LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS
$$ SELECT coalesce(sum(f.bytes), 0)::bigint FROM pgdl.feature_cache f $$;
COMMENT ON FUNCTION pgdl.feature_cache_bytes() IS
	'bytes that all feature caches (every role''s) take, against pgdl.feature_cache_budget';

-- a cache view is refreshed as its owner under the catalog's policies, also by a restore
ALTER FUNCTION pgdl.cache_features(bigint, integer, integer, text, real[], integer) SET row_security = on;

CREATE OR REPLACE FUNCTION pgdl.features_batch(model text, layer integer, source regclass)
	RETURNS TABLE (part integer, buffer_id integer, n integer, x real[], y real[])
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE AS
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

CREATE OR REPLACE FUNCTION pgdl.cleanup_feature_cache(unused_for interval DEFAULT '7 days') RETURNS integer
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

-- packed_version looks its table up first; drop_feature_cache is STRICT (as in 65_feature_cache.sql)
CREATE OR REPLACE FUNCTION pgdl.packed_version(packed regclass) RETURNS text
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

CREATE OR REPLACE FUNCTION pgdl.features_batch(model bigint, layer integer, source regclass)
	RETURNS TABLE (part integer, buffer_id integer, n integer, x real[], y real[])
	LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE AS
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

CREATE OR REPLACE FUNCTION pgdl.drop_feature_cache(cache regclass) RETURNS void
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


-- ---- 5. Owners, sharing and row-level security: 70_owners.sql as it is ----

-- Owners, sharing and row-level security (see docs/security.md).
--
-- Every catalog row has an owner, the role that wrote it.  Row-level security makes PostgreSQL's usual
-- rules hold in the catalog: a role sees and changes the rows of the roles it is a member of, and sees
-- the models it was granted (pgdl.grant_model) and the datasets it may read; superusers and members of
-- pgdl_admin see and change everything.  The functions of pgdl run as the caller, background workers
-- too, so these rules are the only ones: nothing of pgdl reads the catalog with other rights but the
-- four SECURITY DEFINER functions that must touch other roles' rows (65_feature_cache.sql:
-- base_model_changed, forget_dropped_relations, feature_cache_bytes; 20_catalog.sql:
-- forget_deleted_rows).

-- The administrators of the catalog.  A role is not part of an extension: DROP EXTENSION leaves it.
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgdl_admin') THEN
		CREATE ROLE pgdl_admin NOLOGIN;
		COMMENT ON ROLE pgdl_admin IS
			'pgdl: its members see and change every row of the pgdl catalog, whoever owns it (made by CREATE EXTENSION pgdl, left by DROP EXTENSION)';
	END IF;
END
$$;

-- Who acts as an owner; written once for every policy.  SQL functions without SET, so that the
-- planner inlines them; every name is qualified.
CREATE FUNCTION pgdl.acts_as(owner regrole) RETURNS boolean
	LANGUAGE sql STABLE PARALLEL SAFE AS
$$
SELECT pg_catalog.pg_has_role($1, 'MEMBER')
	OR coalesce(pg_catalog.pg_has_role(pg_catalog.to_regrole('pgdl_admin'), 'MEMBER'), false)
$$;
COMMENT ON FUNCTION pgdl.acts_as(regrole) IS
	'whether the current role acts as the owner of a catalog row: a member of the owning role or of pgdl_admin';

-- An owner may write any acl into its own rows: one aclexplode refuses (empty, 2-D, a NULL) grants
-- nothing, rather than failing every other role's read of pgdl.models.
CREATE FUNCTION pgdl.granted(acl aclitem[]) RETURNS boolean
	LANGUAGE sql STABLE PARALLEL SAFE AS
$$
SELECT CASE WHEN pg_catalog.array_ndims($1) = 1 AND pg_catalog.array_position($1, NULL) IS NULL
			THEN EXISTS (SELECT 1 FROM pg_catalog.aclexplode($1) a
						  WHERE a.grantee = 0 OR pg_catalog.pg_has_role(a.grantee, 'MEMBER'))
			ELSE false END
$$;
COMMENT ON FUNCTION pgdl.granted(aclitem[]) IS
	'whether a pgdl.models acl grants the current role (or PUBLIC) the use of the model';

-- What a run writes (its metrics, checkpoints and models) belongs to the run's owner, whoever writes it
-- (a member of the owning role resuming its run, a superuser): so "the checkpoints of run r" are
-- always its owner's.  A model given away later keeps its new owner: that trigger fires on INSERT only,
-- and only for a row that names its writer as its owner (the default), so that a restore, which writes
-- every row with its owner, keeps the models given away (all but those given to the restoring role).
CREATE FUNCTION pgdl.owned_by_run() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	run_owner regrole;
BEGIN
	-- a run the writer may not see leaves the row as written, for the policy to refuse
	SELECT r.owner INTO run_owner FROM pgdl.runs r WHERE r.id = NEW.run;
	IF FOUND THEN
		NEW.owner := run_owner;
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION pgdl.owned_by_run() IS
	'trigger on pgdl.run_metrics, pgdl.checkpoints and pgdl.models: a row a run writes belongs to the owner of the run';
CREATE TRIGGER run_metrics_owner BEFORE INSERT OR UPDATE OF run, owner ON pgdl.run_metrics
	FOR EACH ROW EXECUTE FUNCTION pgdl.owned_by_run();
CREATE TRIGGER checkpoints_owner BEFORE INSERT OR UPDATE OF run, owner ON pgdl.checkpoints
	FOR EACH ROW EXECUTE FUNCTION pgdl.owned_by_run();
CREATE TRIGGER models_owner BEFORE INSERT ON pgdl.models
	FOR EACH ROW WHEN (NEW.run IS NOT NULL AND NEW.owner = quote_ident(current_user)::regrole)
	EXECUTE FUNCTION pgdl.owned_by_run();

-- ---- Row-level security ----
--
-- The owners: every command.  A row written must be the writer's (or a role's it is a member of),
-- and what it points at in the catalog must be the writer's to use.
ALTER TABLE pgdl.datasets ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.architectures ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.models ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.run_metrics ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.configs ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.checkpoints ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.feature_cache ENABLE ROW LEVEL SECURITY;

CREATE POLICY owners ON pgdl.datasets USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.architectures USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.runs USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.models USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.feature_cache USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.configs USING (pgdl.acts_as(owner))
	WITH CHECK (pgdl.acts_as(owner) AND (architecture IS NULL OR
			EXISTS (SELECT 1 FROM pgdl.architectures a WHERE a.id = configs.architecture)));
-- nobody writes into another role's run: its checkpoints are what pgdl.resume trains on
CREATE POLICY owners ON pgdl.run_metrics USING (pgdl.acts_as(owner))
	WITH CHECK (pgdl.acts_as(owner) AND
			EXISTS (SELECT 1 FROM pgdl.runs r WHERE r.id = run_metrics.run AND r.owner = run_metrics.owner));
CREATE POLICY owners ON pgdl.checkpoints USING (pgdl.acts_as(owner))
	WITH CHECK (pgdl.acts_as(owner) AND
			EXISTS (SELECT 1 FROM pgdl.runs r WHERE r.id = checkpoints.run AND r.owner = checkpoints.owner));

-- Who else reads.  A model: those it was granted to.  A dataset (classes, normalization, size): those
-- who may read its packed table, and those granted a model its owner trained on it, since predicting
-- with the model needs them.
CREATE POLICY grantees ON pgdl.models FOR SELECT USING (pgdl.granted(acl));
CREATE POLICY readers ON pgdl.datasets FOR SELECT
	USING (pg_catalog.has_table_privilege(packed::oid, 'SELECT') OR
		   EXISTS (SELECT 1 FROM pgdl.models m
					WHERE m.dataset = datasets.id AND pg_catalog.pg_has_role(m.owner, datasets.owner, 'MEMBER')));

COMMENT ON POLICY owners ON pgdl.datasets IS 'the owner of a dataset (or pgdl_admin) reads and changes it';
COMMENT ON POLICY readers ON pgdl.datasets IS
	'those who may SELECT the packed table, or use a model the dataset''s owner trained on it, read the dataset';
COMMENT ON POLICY owners ON pgdl.architectures IS 'the owner of an architecture (or pgdl_admin) reads and changes it';
COMMENT ON POLICY owners ON pgdl.runs IS 'the owner of a run (or pgdl_admin) reads and changes it';
COMMENT ON POLICY owners ON pgdl.models IS 'the owner of a model (or pgdl_admin) reads and changes it';
COMMENT ON POLICY grantees ON pgdl.models IS 'those a model was granted to (pgdl.grant_model) read it';
COMMENT ON POLICY owners ON pgdl.feature_cache IS 'the owner of a feature cache (or pgdl_admin) reads and changes its row';
COMMENT ON POLICY owners ON pgdl.configs IS
	'the owner of a configuration (or pgdl_admin) reads and changes it; its architecture must be one the writer may use';
COMMENT ON POLICY owners ON pgdl.run_metrics IS
	'the owner of a run (or pgdl_admin) reads and changes its metrics; nobody writes metrics into another role''s run';
COMMENT ON POLICY owners ON pgdl.checkpoints IS
	'the owner of a run (or pgdl_admin) reads and changes its checkpoints; nobody writes checkpoints into another role''s run';

-- ---- Names ----
--
-- A model, architecture or configuration set named by the current role is its own, else the only one
-- of that name it may use; several, none its own, is an error (what it echoes cut short); none is NULL
-- (as to_regclass), for the caller's own "does not exist".
CREATE FUNCTION pgdl.resolve_name(kind text, name text, ids bigint[], owners regrole[], hint text)
	RETURNS bigint
	LANGUAGE plpgsql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	me regrole := quote_ident(current_user)::regrole;
BEGIN
	FOR i IN 1 .. coalesce(cardinality(ids), 0) LOOP
		IF owners[i] = me THEN
			RETURN ids[i];
		END IF;
	END LOOP;
	IF cardinality(ids) > 1 THEN
		RAISE EXCEPTION '% "%" is ambiguous', left(kind, 64), CASE WHEN length(name) > 64 THEN left(name, 64) || '...' ELSE name END
			USING ERRCODE = 'ambiguous_alias',
				  DETAIL = format('You have none of that name, and these roles have one you may use: %s.',
								  array_to_string(owners[1:10]::text[], ', ') || CASE WHEN cardinality(owners) > 10 THEN ', ...' ELSE '' END),
				  HINT = left(hint, 200);
	END IF;
	RETURN ids[1];
END
$$;
COMMENT ON FUNCTION pgdl.resolve_name(text, text, bigint[], regrole[], text) IS
	'internal, the rule of names: of the rows of a name the current role may use (ids, their owners), its own, else the only one; NULL if none, an error if several';

CREATE FUNCTION pgdl.model_id(name text) RETURNS bigint
	LANGUAGE sql STABLE STRICT PARALLEL SAFE AS
$$
SELECT pgdl.resolve_name('model', $1, array_agg(m.id ORDER BY m.id), array_agg(m.owner ORDER BY m.id),
						 'Give the model''s id (pgdl.models.id), or SET ROLE to its owner.')
  FROM pgdl.models m WHERE m.name = $1
$$;
COMMENT ON FUNCTION pgdl.model_id(text) IS
	'the id of the model a name means to the current role: its own, else the only one of that name it may use; NULL if none';

CREATE FUNCTION pgdl.architecture_id(name text) RETURNS bigint
	LANGUAGE sql STABLE STRICT PARALLEL SAFE AS
$$
SELECT pgdl.resolve_name('architecture', $1, array_agg(a.id ORDER BY a.id), array_agg(a.owner ORDER BY a.id),
						 'Store one of your own with pgdl.add_architecture(), or SET ROLE to its owner.')
  FROM pgdl.architectures a WHERE a.name = $1
$$;
COMMENT ON FUNCTION pgdl.architecture_id(text) IS
	'the id of the architecture a name means to the current role: its own, else the only one of that name it may use; NULL if none';

-- A set is the rows of one owner with one set name; a run's set is its owner's.
CREATE FUNCTION pgdl.config_set_owner(set_name text, run bigint DEFAULT NULL) RETURNS regrole
	LANGUAGE sql STABLE PARALLEL SAFE AS
$$
SELECT CASE WHEN coalesce($2, 0) <> 0 THEN (SELECT r.owner FROM pgdl.runs r WHERE r.id = $2)
	   ELSE (SELECT pgdl.resolve_name('configuration set', $1, array_agg(s.o::oid::bigint ORDER BY s.o),
									  array_agg(s.o ORDER BY s.o),
									  'SET ROLE to the owner of the set you mean, or make a set of your own.')::oid::regrole
			   FROM (SELECT DISTINCT c.owner AS o FROM pgdl.configs c WHERE c.set_name = $1) s)
	   END
$$;
COMMENT ON FUNCTION pgdl.config_set_owner(text, bigint) IS
	'whose configuration set a name means to the current role: its own, else the only one of that name it may use (NULL if none); with a run, the run''s owner';

-- ---- Sharing ----
--
-- A granted model can be used (predict, evaluate, features, a base model) and not changed: the
-- grantees policy lets it be read, and only the owners policy lets it be written.  Grants are
-- aclitems, USAGE, granted by the model's owner.
CREATE FUNCTION pgdl.set_model_grant(model bigint, model_label text, role text, shared boolean)
	RETURNS void
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	to_role oid;
	model_owner regrole;
BEGIN
	-- a 10 MB name is not echoed whole
	IF length(model_label) > 66 THEN
		model_label := left(model_label, 65) || '..."';
	END IF;
	-- NULL would read as "no role": a revoke from every grantee
	IF role IS NULL OR shared IS NULL THEN
		RAISE EXCEPTION 'role and shared must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	to_role := CASE WHEN lower(role) = 'public' THEN 0 ELSE role::regrole::oid END;
	-- regrole takes any number as an oid, and 0 or '-' as no role: only "public" means PUBLIC
	IF lower(role) <> 'public' AND NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = to_role) THEN
		RAISE EXCEPTION 'role with OID % does not exist', to_role USING ERRCODE = 'undefined_object';
	END IF;
	SELECT m.owner INTO model_owner FROM pgdl.models m WHERE m.id = model;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'model % does not exist', model_label USING ERRCODE = 'undefined_object';
	END IF;
	IF NOT pgdl.acts_as(model_owner) THEN
		RAISE EXCEPTION 'must be owner of model %', model_label
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = format('Model %s belongs to %s, who may grant and revoke its use.', model_label, model_owner);
	END IF;
	UPDATE pgdl.models m
	   SET acl = nullif(ARRAY(SELECT i FROM unnest(m.acl) i
							   WHERE (SELECT a.grantee FROM aclexplode(ARRAY[i]) a) <> to_role) ||
						CASE WHEN shared THEN ARRAY[makeaclitem(to_role, model_owner, 'USAGE', false)]
							 ELSE '{}'::aclitem[] END, '{}')
	 WHERE m.id = model;
END
$$;
COMMENT ON FUNCTION pgdl.set_model_grant(bigint, text, text, boolean) IS
	'internal, pgdl.grant_model and pgdl.revoke_model: adds or removes a role''s USAGE in a model''s acl';

CREATE FUNCTION pgdl.grant_model(model bigint, role text) RETURNS void
	LANGUAGE sql VOLATILE STRICT AS
$$ SELECT pgdl.set_model_grant($1, $1::text, $2, true) $$;
CREATE FUNCTION pgdl.grant_model(model text, role text) RETURNS void
	LANGUAGE sql VOLATILE STRICT AS
$$ SELECT pgdl.set_model_grant(pgdl.model_id($1), format('"%s"', $1), $2, true) $$;
CREATE FUNCTION pgdl.revoke_model(model bigint, role text) RETURNS void
	LANGUAGE sql VOLATILE STRICT AS
$$ SELECT pgdl.set_model_grant($1, $1::text, $2, false) $$;
CREATE FUNCTION pgdl.revoke_model(model text, role text) RETURNS void
	LANGUAGE sql VOLATILE STRICT AS
$$ SELECT pgdl.set_model_grant(pgdl.model_id($1), format('"%s"', $1), $2, false) $$;
COMMENT ON FUNCTION pgdl.grant_model(bigint, text) IS
	'lets a role (or PUBLIC) use stored model (by id): predict, evaluate, features, base model; not change it. Only its owner grants';
COMMENT ON FUNCTION pgdl.grant_model(text, text) IS
	'lets a role (or PUBLIC) use stored model (by name): predict, evaluate, features, base model; not change it. Only its owner grants';
COMMENT ON FUNCTION pgdl.revoke_model(bigint, text) IS
	'takes back from a role (or PUBLIC) the use of stored model (by id) that pgdl.grant_model gave';
COMMENT ON FUNCTION pgdl.revoke_model(text, text) IS
	'takes back from a role (or PUBLIC) the use of stored model (by name) that pgdl.grant_model gave';

-- ---- 6. 75_lifecycle.sql as it is ----

-- The extension's life: checkpoints of finished runs, runs in flight, DROP EXTENSION.

-- Checkpoints are for pgdl.resume; a finished run keeps the last pgdl.keep_checkpoints of each of its
-- models (pruned when it finishes), and this prunes those of earlier runs.
CREATE FUNCTION pgdl.cleanup_checkpoints(keep integer DEFAULT NULL, run bigint DEFAULT NULL) RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_cleanup_checkpoints' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.cleanup_checkpoints(integer, bigint) IS
	'deletes all but the last `keep` checkpoints (default pgdl.keep_checkpoints; -1 keeps all) of each model of the caller''s runs not in flight (or of one run), keeping at least the last of a run that did not finish so that it can be resumed; returns how many';

CREATE FUNCTION pgdl.run_in_progress(run bigint) RETURNS boolean
	AS 'MODULE_PATHNAME', 'pgdl_run_in_progress' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.run_in_progress(bigint) IS
	'whether a pgdl.fit_multiple or pgdl.resume of the run is in flight: its leader or one of its workers is alive';

-- DROP EXTENSION pgdl takes its schemas, catalog and caches, and leaves the packed tables, which are
-- their owners' tables: it says which.  ddl_command_start, since by sql_drop pgdl.datasets is gone;
-- the C function reads the statement, so that it speaks only when pgdl is dropped.
CREATE FUNCTION pgdl.on_drop_extension() RETURNS event_trigger
	AS 'MODULE_PATHNAME', 'pgdl_on_drop_extension' LANGUAGE C;
COMMENT ON FUNCTION pgdl.on_drop_extension() IS
	'event trigger: a NOTICE at DROP EXTENSION pgdl that lists the packed tables it leaves';
CREATE EVENT TRIGGER pgdl_drop_extension ON ddl_command_start WHEN TAG IN ('DROP EXTENSION')
	EXECUTE FUNCTION pgdl.on_drop_extension();

-- ---- 7. divergence: a model's state per epoch, and the leaderboard's diverged column ----

-- Added without a default and then filled: a constant default would be kept as the column's "missing
-- value", which a fresh install does not have (the upgrade test compares the two catalogs).
ALTER TABLE pgdl.run_metrics
	ADD COLUMN state text CHECK (state IN ('ok', 'diverged'));	-- 'diverged': training stopped in this epoch
UPDATE pgdl.run_metrics SET state = 'ok';
ALTER TABLE pgdl.run_metrics ALTER COLUMN state SET DEFAULT 'ok', ALTER COLUMN state SET NOT NULL;

-- A function's result columns cannot change in place.
DROP FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text);
DROP FUNCTION pgdl.resume(bigint, integer);

CREATE FUNCTION pgdl.fit_multiple(source regclass, configs text, epochs integer DEFAULT 10,
		validation regclass DEFAULT NULL, workers integer DEFAULT NULL, strategy text DEFAULT 'all',
		eta integer DEFAULT 3, name_prefix text DEFAULT NULL, feature_cache text DEFAULT 'auto')
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_fit_multiple' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.fit_multiple(regclass, text, integer, regclass, integer, text, integer, text, text) IS
	'trains every configuration of a set at once on a packed table with background workers (model hopper parallelism), sharing the frozen layers of configurations with a base model through feature caches (feature_cache: auto, on, off); stores the models and returns the leaderboard';

CREATE FUNCTION pgdl.resume(run bigint, workers integer DEFAULT NULL)
	RETURNS TABLE (rank integer, model bigint, config bigint, architecture text, config_json jsonb,
				   epochs integer, train_loss double precision, train_accuracy double precision,
				   validation_loss double precision, validation_accuracy double precision, stopped boolean,
				   diverged boolean)
	AS 'MODULE_PATHNAME', 'pgdl_resume' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.resume(bigint, integer) IS
	'continues a cancelled or crashed pgdl.fit_multiple run from each model''s last checkpoint';
