-- Deployments: a name that answers every function taking a model by name (predict, predict_batch,
-- evaluate, metrics, explain, export_onnx, ...) with one model, its history, and rollback.
--
-- The tables are in 20_catalog.sql, their policies in 70_owners.sql.  A name belongs to the owner of
-- the models it serves; the model it serves is pgdl.deployed_model's (the newest entry not rolled back).
-- Every function here runs as the caller: row-level security decides what it may see and change.

-- One label for a name in messages: a 10 MB name is not echoed whole.
CREATE FUNCTION pgdl.deployment_label(name text) RETURNS text
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$ SELECT '"' || CASE WHEN length($1) > 64 THEN left($1, 64) || '...' ELSE $1 END || '"' $$;
COMMENT ON FUNCTION pgdl.deployment_label(text) IS
	'internal, a deployment name as messages quote it, cut short';

-- The caller's deployment of a name, locked until the transaction ends (one deploy or rollback of a
-- name at a time); its own, else the only one it acts as owner of.
CREATE FUNCTION pgdl.deployment_for_update(name text) RETURNS pgdl.deployment_names
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	found_id bigint;
	found_row pgdl.deployment_names;
BEGIN
	IF name IS NULL THEN
		RAISE EXCEPTION 'name must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	found_id := pgdl.resolve_name('deployment', $1, array_agg(d.id ORDER BY d.id), array_agg(d.owner ORDER BY d.id),
							'SET ROLE to the owner of the deployment you mean.')
		    FROM pgdl.deployment_names d WHERE d.name = $1 AND pgdl.acts_as(d.owner);
	SELECT * INTO found_row FROM pgdl.deployment_names d WHERE d.id = found_id FOR UPDATE;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'deployment % does not exist', pgdl.deployment_label(name)
			USING ERRCODE = 'undefined_object',
				  HINT = CASE WHEN EXISTS (SELECT 1 FROM pgdl.deployment_names d WHERE d.name = $1)
							  THEN 'Only its owner may change it.' ELSE 'Make one with pgdl.deploy().' END;
	END IF;
	RETURN found_row;
END
$$;
COMMENT ON FUNCTION pgdl.deployment_for_update(text) IS
	'internal, the deployment of a name the caller acts as owner of, locked FOR UPDATE; an error if none';

CREATE FUNCTION pgdl.deploy(name text, model bigint) RETURNS bigint
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	m record;
	d pgdl.deployment_names;
BEGIN
	IF name IS NULL OR model IS NULL THEN
		RAISE EXCEPTION 'name and model must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF length(name) NOT BETWEEN 1 AND 200 THEN
		RAISE EXCEPTION 'a deployment name must have 1 to 200 characters, not %', length(name)
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	SELECT x.id, x.owner, x.metrics INTO m FROM pgdl.models x WHERE x.id = $2;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'model % does not exist', model USING ERRCODE = 'undefined_object';
	END IF;
	IF NOT pgdl.acts_as(m.owner) THEN
		RAISE EXCEPTION 'must be owner of model %', model
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = format('Model %s belongs to %s. A deployment serves its owner''s own models, so that granting it grants no more than its owner has.', model, m.owner),
				  HINT = format('Ask %s to deploy it.', m.owner);
	END IF;
	-- the same rule pgdl.predict applies: a model whose weights are not a trained model's serves nothing
	IF jsonb_typeof(m.metrics) = 'object' AND m.metrics->'diverged' = 'true' THEN
		RAISE EXCEPTION 'model % diverged in epoch %', model, m.metrics->>'epoch'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'Its loss or weights became NaN or infinite in that epoch and training stopped: its weights are not those of a trained model.';
	END IF;
	SELECT * INTO d FROM pgdl.deployment_names x WHERE x.name = $1 AND x.owner = m.owner FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO pgdl.deployment_names (name, owner) VALUES ($1, m.owner) RETURNING * INTO d;
	ELSIF pgdl.deployed_model(d.id) = model THEN
		RAISE NOTICE 'model % is already deployed as %', model, pgdl.deployment_label(name);
		RETURN model;
	END IF;
	INSERT INTO pgdl.deployment_history (deployment, model, owner) VALUES (d.id, model, m.owner);
	RETURN model;
END
$$;
CREATE FUNCTION pgdl.deploy(name text, model text) RETURNS bigint
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	id bigint;
BEGIN
	IF model IS NULL THEN
		RAISE EXCEPTION 'name and model must not be NULL' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	id := pgdl.model_id(model);
	IF id IS NULL THEN
		RAISE EXCEPTION 'model % does not exist', pgdl.deployment_label(model) USING ERRCODE = 'undefined_object';
	END IF;
	RETURN pgdl.deploy(name, id);
END
$$;
COMMENT ON FUNCTION pgdl.deploy(text, bigint) IS
	'makes a name answer every function that takes a model by name with stored model (by id), the owner''s; keeps the name''s history; returns the model''s id';
COMMENT ON FUNCTION pgdl.deploy(text, text) IS
	'makes a name answer every function that takes a model by name with stored model (by name, or the model another deployment serves); returns the model''s id';

CREATE FUNCTION pgdl.rollback(name text) RETURNS bigint
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	d pgdl.deployment_names := pgdl.deployment_for_update(name);
	current_entry bigint := pgdl.deployed_entry(d.id);
	previous_model bigint;
BEGIN
	SELECT h.model INTO previous_model FROM pgdl.deployment_history h
	 WHERE h.deployment = d.id AND h.rolled_back_at IS NULL AND h.id < current_entry ORDER BY h.id DESC LIMIT 1;
	IF previous_model IS NULL THEN
		RAISE EXCEPTION 'deployment % has no earlier model to go back to', pgdl.deployment_label(name)
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'Every model it served before the one it serves now was rolled back, or it served no other.',
				  HINT = 'Deploy another model with pgdl.deploy(), or remove the name with pgdl.drop_deployment().';
	END IF;
	UPDATE pgdl.deployment_history h
	   SET rolled_back_by = quote_ident(current_user)::regrole, rolled_back_at = now()
	 WHERE h.id = current_entry;
	RETURN previous_model;
END
$$;
COMMENT ON FUNCTION pgdl.rollback(text) IS
	'makes a deployment serve again the model it served before the one it serves now (which is marked rolled back in its history); returns that model''s id';

CREATE FUNCTION pgdl.drop_deployment(name text) RETURNS void
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
BEGIN
	PERFORM pgdl.delete_rows('pgdl.deployment_names', ARRAY[(pgdl.deployment_for_update(name)).id]);
END
$$;
COMMENT ON FUNCTION pgdl.drop_deployment(text) IS
	'removes a deployment name and its history (its models stay, and may be deleted then)';

CREATE FUNCTION pgdl.set_deployment_grant(name text, role text, shared boolean) RETURNS void
	LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS
$$
DECLARE
	d pgdl.deployment_names := pgdl.deployment_for_update(name);
BEGIN
	UPDATE pgdl.deployment_names x SET acl = pgdl.acl_with(d.acl, role, d.owner, shared) WHERE x.id = d.id;
END
$$;
COMMENT ON FUNCTION pgdl.set_deployment_grant(text, text, boolean) IS
	'internal, pgdl.grant_deployment and pgdl.revoke_deployment: adds or removes a role''s USAGE in a deployment''s acl';
CREATE FUNCTION pgdl.grant_deployment(name text, role text) RETURNS void
	LANGUAGE sql VOLATILE AS
$$ SELECT pgdl.set_deployment_grant($1, $2, true) $$;
CREATE FUNCTION pgdl.revoke_deployment(name text, role text) RETURNS void
	LANGUAGE sql VOLATILE AS
$$ SELECT pgdl.set_deployment_grant($1, $2, false) $$;
COMMENT ON FUNCTION pgdl.grant_deployment(text, text) IS
	'lets a role (or PUBLIC) use a deployment: every function that takes a model by name, with the model it serves at the time; only its owner grants';
COMMENT ON FUNCTION pgdl.revoke_deployment(text, text) IS
	'takes back from a role (or PUBLIC) the use of a deployment that pgdl.grant_deployment gave';

-- Each name's history, oldest first: what it served, who deployed and rolled back what, and when; the
-- model's metrics (of its last or restored epoch, with the validation set's) where the reader may see it.
CREATE VIEW pgdl.deployments WITH (security_invoker = true) AS
	SELECT d.name, d.owner,
		   row_number() OVER (PARTITION BY d.id ORDER BY h.id)::integer AS version,
		   h.model, m.name AS model_name, h.deployed_by, h.deployed_at, h.rolled_back_by, h.rolled_back_at,
		   h.id IS NOT DISTINCT FROM pgdl.deployed_entry(d.id) AS active,
		   m.metrics
	  FROM pgdl.deployment_names d
	  JOIN pgdl.deployment_history h ON h.deployment = d.id
	  LEFT JOIN pgdl.models m ON m.id = h.model;
COMMENT ON VIEW pgdl.deployments IS
	'every deployment name''s history, a row per model it served (version 1 first): who deployed it and when, whether it was rolled back, whether it serves now (active), the model''s metrics';
GRANT SELECT ON pgdl.deployments TO PUBLIC;
