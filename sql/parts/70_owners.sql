-- Owners, sharing and row-level security (see docs/security.md).
--
-- Every catalog row has an owner, the role that wrote it.  Row-level security makes PostgreSQL's usual
-- rules hold in the catalog: a role sees and changes the rows of the roles it is a member of, and sees
-- the models it was granted (pgdl.grant_model) and the datasets it may read; superusers and members of
-- pgdl_admin see and change everything.  The functions of pgdl run as the caller, background workers
-- too, so these rules are the only ones: nothing of pgdl touches the catalog with other rights but the
-- SECURITY DEFINER functions that must touch other roles' rows, and pgdl.delete_rows (src/base/owners.c),
-- each argued in docs/security.md, whose test fails on a definer function it does not name.
--
-- No ordinary role holds UPDATE or DELETE on a catalog table as a whole: in PostgreSQL 15 either lets
-- its holder LOCK the table in every mode and stall every role.  Roles update by column (below) and
-- delete through pgdl.delete_rows.  Trigger functions are not PUBLIC's to execute (CREATE TRIGGER needs
-- it) and refuse to fire on any table but those they serve.

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
	-- pgdl.calibrate() times a copy of pgdl.checkpoints in schema pgdl, where only pgdl creates tables
	IF (TG_RELID NOT IN ('pgdl.run_metrics'::regclass, 'pgdl.checkpoints'::regclass, 'pgdl.models'::regclass)
		AND NOT (TG_TABLE_SCHEMA = 'pgdl' AND TG_TABLE_NAME LIKE 'calibrate\_checkpoint\_%'))
	   OR TG_WHEN <> 'BEFORE' OR TG_LEVEL <> 'ROW' THEN
		RAISE EXCEPTION 'pgdl.owned_by_run() may only be fired by pgdl.run_metrics, checkpoints and models, BEFORE FOR EACH ROW'
			USING ERRCODE = 'trigger_protocol_violated',
				  DETAIL = format('It was fired by table "%s".', left(TG_TABLE_NAME, 64));
	END IF;
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
REVOKE EXECUTE ON FUNCTION pgdl.owned_by_run() FROM PUBLIC;
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
ALTER TABLE pgdl.deployment_names ENABLE ROW LEVEL SECURITY;
ALTER TABLE pgdl.deployment_history ENABLE ROW LEVEL SECURITY;

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
-- A name serves its owner's own models only, so that granting the name grants no more than its owner has.
CREATE POLICY owners ON pgdl.deployment_names USING (pgdl.acts_as(owner)) WITH CHECK (pgdl.acts_as(owner));
CREATE POLICY owners ON pgdl.deployment_history USING (pgdl.acts_as(owner))
	WITH CHECK (pgdl.acts_as(owner) AND
			EXISTS (SELECT 1 FROM pgdl.deployment_names d
					 WHERE d.id = deployment_history.deployment AND d.owner = deployment_history.owner) AND
			EXISTS (SELECT 1 FROM pgdl.models m
					 WHERE m.id = deployment_history.model AND m.owner = deployment_history.owner));

-- Who else reads.  A model: those it was granted to.  A dataset (classes, normalization, size): those
-- who may read its packed table, and those granted a model its owner trained on it, since predicting
-- with the model needs them.
CREATE POLICY grantees ON pgdl.models FOR SELECT USING (pgdl.granted(acl));
-- A deployment's grantees: its name, its history, and the model it serves now (not the ones it served).
CREATE POLICY grantees ON pgdl.deployment_names FOR SELECT USING (pgdl.granted(acl));
CREATE POLICY grantees ON pgdl.deployment_history FOR SELECT
	USING (EXISTS (SELECT 1 FROM pgdl.deployment_names d WHERE d.id = deployment_history.deployment));
CREATE POLICY deployed ON pgdl.models FOR SELECT
	USING (EXISTS (SELECT 1 FROM pgdl.deployment_names d
					WHERE d.owner = models.owner AND pgdl.granted(d.acl) AND pgdl.deployed_model(d.id) = models.id));
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
COMMENT ON POLICY deployed ON pgdl.models IS
	'those a deployment was granted to (pgdl.grant_deployment) read the model it serves, when its owner owns the model';
COMMENT ON POLICY owners ON pgdl.deployment_names IS 'the owner of a deployment name (or pgdl_admin) reads and changes it';
COMMENT ON POLICY grantees ON pgdl.deployment_names IS 'those a deployment was granted to (pgdl.grant_deployment) read its name';
COMMENT ON POLICY owners ON pgdl.deployment_history IS
	'the owner of a deployment (or pgdl_admin) reads and changes its history; an entry names a model of the name''s owner';
COMMENT ON POLICY grantees ON pgdl.deployment_history IS 'those who may read a deployment name read its history';
COMMENT ON POLICY owners ON pgdl.feature_cache IS 'the owner of a feature cache (or pgdl_admin) reads and changes its row';
COMMENT ON POLICY owners ON pgdl.configs IS
	'the owner of a configuration (or pgdl_admin) reads and changes it; its architecture must be one the writer may use';
COMMENT ON POLICY owners ON pgdl.run_metrics IS
	'the owner of a run (or pgdl_admin) reads and changes its metrics; nobody writes metrics into another role''s run';
COMMENT ON POLICY owners ON pgdl.checkpoints IS
	'the owner of a run (or pgdl_admin) reads and changes its checkpoints; nobody writes checkpoints into another role''s run';

-- What a row points at must be the writer's to see.  The foreign keys look as the tables' owner, who
-- sees every row: without this, a row pointing at another role's id would be stored where a missing id
-- is refused, telling the writer which of another role's ids exist (and locking that role's row FOR KEY
-- SHARE).  So an id the writer may not see is refused here, with the foreign key's own error, exactly as
-- a missing one is.  A role that bypasses row-level security sees every row: the keys are the check.
-- configs, run_metrics and checkpoints check what they point at in their policies.
CREATE FUNCTION pgdl.references_visible() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	cols text[];
	refs text[];
	keys bigint[];
	olds bigint[];
	seen boolean;
BEGIN
	IF TG_WHEN <> 'BEFORE' OR TG_LEVEL <> 'ROW' OR TG_OP NOT IN ('INSERT', 'UPDATE') THEN
		RAISE EXCEPTION 'pgdl.references_visible() may only be fired BEFORE INSERT OR UPDATE FOR EACH ROW'
			USING ERRCODE = 'trigger_protocol_violated';
	ELSIF TG_RELID = 'pgdl.models'::regclass THEN
		cols := '{architecture, dataset, run}';
		refs := '{architectures, datasets, runs}';
		keys := ARRAY[NEW.architecture, NEW.dataset, NEW.run];
		olds := CASE WHEN TG_OP = 'UPDATE' THEN ARRAY[OLD.architecture, OLD.dataset, OLD.run] END;
	ELSIF TG_RELID = 'pgdl.runs'::regclass THEN
		cols := '{dataset, validation, architecture}';
		refs := '{datasets, datasets, architectures}';
		keys := ARRAY[NEW.dataset, NEW.validation, NEW.architecture];
		olds := CASE WHEN TG_OP = 'UPDATE' THEN ARRAY[OLD.dataset, OLD.validation, OLD.architecture] END;
	ELSIF TG_RELID = 'pgdl.feature_cache'::regclass THEN
		cols := '{dataset}';
		refs := '{datasets}';
		keys := ARRAY[NEW.dataset];
		olds := CASE WHEN TG_OP = 'UPDATE' THEN ARRAY[OLD.dataset] END;
	ELSE
		RAISE EXCEPTION 'pgdl.references_visible() may only be fired by pgdl.models, runs and feature_cache'
			USING ERRCODE = 'trigger_protocol_violated',
				  DETAIL = format('It was fired by table "%s".', left(TG_TABLE_NAME, 64));
	END IF;
	FOR i IN 1 .. cardinality(cols) LOOP
		CONTINUE WHEN keys[i] IS NULL OR keys[i] IS NOT DISTINCT FROM olds[i]
				   OR NOT row_security_active(format('pgdl.%I', refs[i]));
		EXECUTE format('SELECT EXISTS (SELECT 1 FROM pgdl.%I r WHERE r.id = $1)', refs[i]) INTO seen USING keys[i];
		IF NOT seen THEN
			RAISE EXCEPTION 'insert or update on table "%" violates foreign key constraint "%"',
				  TG_TABLE_NAME, format('%s_%s_fkey', TG_TABLE_NAME, cols[i])
				USING ERRCODE = 'foreign_key_violation',
					  DETAIL = format('Key (%s)=(%s) is not present in table "%s".', cols[i], keys[i], refs[i]),
					  SCHEMA = TG_TABLE_SCHEMA, TABLE = TG_TABLE_NAME,
					  CONSTRAINT = format('%s_%s_fkey', TG_TABLE_NAME, cols[i]);
		END IF;
	END LOOP;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION pgdl.references_visible() IS
	'trigger of pgdl.models, runs and feature_cache: an id the writer may not see is refused as a missing one is';
REVOKE EXECUTE ON FUNCTION pgdl.references_visible() FROM PUBLIC;
CREATE TRIGGER models_references BEFORE INSERT OR UPDATE OF architecture, dataset, run ON pgdl.models
	FOR EACH ROW EXECUTE FUNCTION pgdl.references_visible();
CREATE TRIGGER runs_references BEFORE INSERT OR UPDATE OF dataset, validation, architecture ON pgdl.runs
	FOR EACH ROW EXECUTE FUNCTION pgdl.references_visible();
CREATE TRIGGER feature_cache_references BEFORE INSERT OR UPDATE OF dataset ON pgdl.feature_cache
	FOR EACH ROW EXECUTE FUNCTION pgdl.references_visible();

-- ---- Privileges ----
--
-- UPDATE of every column but id, never of a table: row-level security decides which rows, and without
-- a table-level UPDATE or DELETE no ordinary role can LOCK a catalog table beyond ROW EXCLUSIVE (INSERT),
-- which blocks nobody's reads and writes.  pgdl_admin, whose members change every row anyway, may
-- delete by hand.  A column added later is granted in the script that adds it.
DO $$
DECLARE
	t regclass;
	cols text;
BEGIN
	FOREACH t IN ARRAY '{pgdl.datasets, pgdl.architectures, pgdl.models, pgdl.runs, pgdl.run_metrics, pgdl.configs,
						 pgdl.checkpoints, pgdl.feature_cache, pgdl.deployment_names,
						 pgdl.deployment_history}'::regclass[] LOOP
		SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO cols
		  FROM pg_catalog.pg_attribute a
		 WHERE a.attrelid = t AND a.attnum > 0 AND NOT a.attisdropped AND a.attname <> 'id';
		EXECUTE format('GRANT UPDATE (%s) ON %s TO PUBLIC', cols, t);
		EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO pgdl_admin', t);
	END LOOP;
END
$$;

-- DELETE FROM catalog WHERE key = ANY (ids), as the caller's row-level security allows it.
CREATE FUNCTION pgdl.delete_rows(catalog regclass, ids bigint[]) RETURNS bigint
	AS 'MODULE_PATHNAME', 'pgdl_delete_rows' LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.delete_rows(regclass, bigint[]) IS
	'deletes the rows of a pgdl catalog table with these ids (run_metrics and checkpoints: of these runs) that the caller may delete; returns how many';

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

-- Models and deployments share one namespace per owner (pgdl.names_free): a name is a role's model or
-- its deployment, never both, and a deployment means the model it serves.
CREATE FUNCTION pgdl.model_id(name text) RETURNS bigint
	LANGUAGE sql STABLE STRICT PARALLEL SAFE AS
$$
SELECT pgdl.resolve_name('model', $1, array_agg(c.id ORDER BY c.id), array_agg(c.owner ORDER BY c.id),
						 'Give the model''s id (pgdl.models.id), or SET ROLE to its owner.')
  FROM (SELECT m.id, m.owner FROM pgdl.models m WHERE m.name = $1
		UNION ALL
		SELECT pgdl.deployed_model(d.id), d.owner FROM pgdl.deployment_names d WHERE d.name = $1) c
 WHERE c.id IS NOT NULL
$$;
COMMENT ON FUNCTION pgdl.model_id(text) IS
	'the id of the model a name means to the current role (a model''s name, or a deployment''s: the model it serves): its own, else the only one of that name it may use; NULL if none';

-- A role's model and its deployment may not share a name: predict by name would have to choose.
-- Checked whichever is named second, as the writer sees the other table (its own rows).
CREATE FUNCTION pgdl.names_free() RETURNS trigger
	LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	taken boolean;
BEGIN
	IF TG_WHEN <> 'BEFORE' OR TG_LEVEL <> 'ROW' OR TG_OP NOT IN ('INSERT', 'UPDATE') THEN
		RAISE EXCEPTION 'pgdl.names_free() may only be fired BEFORE INSERT OR UPDATE FOR EACH ROW'
			USING ERRCODE = 'trigger_protocol_violated';
	ELSIF TG_RELID = 'pgdl.models'::regclass THEN
		taken := NEW.name IS NOT NULL AND
				 EXISTS (SELECT 1 FROM pgdl.deployment_names d WHERE d.name = NEW.name AND d.owner = NEW.owner);
	ELSIF TG_RELID = 'pgdl.deployment_names'::regclass THEN
		taken := EXISTS (SELECT 1 FROM pgdl.models m WHERE m.name = NEW.name AND m.owner = NEW.owner);
	ELSE
		RAISE EXCEPTION 'pgdl.names_free() may only be fired by pgdl.models and deployment_names'
			USING ERRCODE = 'trigger_protocol_violated',
				  DETAIL = format('It was fired by table "%s".', left(TG_TABLE_NAME, 64));
	END IF;
	IF taken THEN
		RAISE EXCEPTION '"%" is already the name of a % of role %',
			  CASE WHEN length(NEW.name) > 64 THEN left(NEW.name, 64) || '...' ELSE NEW.name END,
			  CASE WHEN TG_RELID = 'pgdl.models'::regclass THEN 'deployment' ELSE 'model' END, NEW.owner
			USING ERRCODE = 'duplicate_object',
				  DETAIL = 'A role''s models and deployments share one set of names, so that a name given to pgdl.predict means one model.',
				  HINT = 'Choose another name.';
	END IF;
	RETURN NEW;
END
$$;
COMMENT ON FUNCTION pgdl.names_free() IS
	'trigger of pgdl.models and pgdl.deployment_names: a role''s model and deployment may not share a name';
REVOKE EXECUTE ON FUNCTION pgdl.names_free() FROM PUBLIC;
-- after models_owner, which sets a run's model's owner (BEFORE triggers fire in name order)
CREATE TRIGGER models_same_name BEFORE INSERT OR UPDATE OF name, owner ON pgdl.models
	FOR EACH ROW EXECUTE FUNCTION pgdl.names_free();
CREATE TRIGGER deployment_names_same_name BEFORE INSERT OR UPDATE OF name, owner ON pgdl.deployment_names
	FOR EACH ROW EXECUTE FUNCTION pgdl.names_free();

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
-- The rule of grants, for models and deployments alike: acl without role's item, then with USAGE
-- granted by owner when shared.  role is a role's name or "public".
CREATE FUNCTION pgdl.acl_with(acl aclitem[], role text, owner regrole, shared boolean) RETURNS aclitem[]
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	to_role oid;
BEGIN
	-- NULL would read as "no role": a revoke from every grantee
	IF role IS NULL OR shared IS NULL THEN
		RAISE EXCEPTION 'role and shared must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	to_role := CASE WHEN lower(role) = 'public' THEN 0 ELSE role::regrole::oid END;
	-- regrole takes any number as an oid, and 0 or '-' as no role: only "public" means PUBLIC
	IF lower(role) <> 'public' AND NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = to_role) THEN
		RAISE EXCEPTION 'role with OID % does not exist', to_role USING ERRCODE = 'undefined_object';
	END IF;
	RETURN nullif(ARRAY(SELECT i FROM unnest(acl) i
						 WHERE (SELECT a.grantee FROM aclexplode(ARRAY[i]) a) <> to_role) ||
				  CASE WHEN shared THEN ARRAY[makeaclitem(to_role, owner, 'USAGE', false)]
					   ELSE '{}'::aclitem[] END, '{}');
END
$$;
COMMENT ON FUNCTION pgdl.acl_with(aclitem[], text, regrole, boolean) IS
	'internal, the grants of models and deployments: acl without role''s USAGE, then with it (granted by owner) when shared';

CREATE FUNCTION pgdl.set_model_grant(model bigint, model_label text, role text, shared boolean)
	RETURNS void
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	model_owner regrole;
	new_acl aclitem[];
BEGIN
	-- a 10 MB name is not echoed whole
	IF length(model_label) > 66 THEN
		model_label := left(model_label, 65) || '..."';
	END IF;
	SELECT m.owner INTO model_owner FROM pgdl.models m WHERE m.id = model;
	IF NOT FOUND THEN
		-- the role is checked first, as it was before a model is looked up
		PERFORM pgdl.acl_with(NULL, role, NULL, shared);
		RAISE EXCEPTION 'model % does not exist', model_label USING ERRCODE = 'undefined_object';
	END IF;
	new_acl := pgdl.acl_with((SELECT m.acl FROM pgdl.models m WHERE m.id = model), role, model_owner, shared);
	IF NOT pgdl.acts_as(model_owner) THEN
		RAISE EXCEPTION 'must be owner of model %', model_label
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = format('Model %s belongs to %s, who may grant and revoke its use.', model_label, model_owner);
	END IF;
	UPDATE pgdl.models m SET acl = new_acl WHERE m.id = model;
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
