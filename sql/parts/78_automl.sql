-- AutoML: from a raw table to a deployed model in one call (pgdl.automl), and a deployed model refitted on
-- new rows and redeployed only when it does better (pgdl.retrain, what a pg_cron job runs nightly).
--
-- Orchestration only: pgdl.split, pgdl.pack, pgdl.random_search, pgdl.explain_fit_multiple,
-- pgdl.fit_multiple and pgdl.deploy_if_better do the work, each with its own checks, as the caller.
-- See docs/reference/automl.md.

CREATE FUNCTION pgdl.rank_metrics() RETURNS TABLE (metric text, higher_is_better boolean, task text)
	AS 'MODULE_PATHNAME', 'pgdl_rank_metrics' LANGUAGE C IMMUTABLE PARALLEL SAFE ROWS 13;
COMMENT ON FUNCTION pgdl.rank_metrics() IS
	'the validation metrics that rank models (fit_multiple''s rank_by, automl''s metric, deploy_if_better''s metric): name, direction, and the task each suits (any, classification, regression)';

CREATE FUNCTION pgdl.deploy_if_better(name text, model bigint, validation regclass, metric text DEFAULT NULL)
	RETURNS TABLE (deployed boolean, previous bigint, metric text, score double precision,
				   previous_score double precision, candidate bigint)
	AS 'MODULE_PATHNAME', 'pgdl_deploy_if_better_sql' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION pgdl.deploy_if_better(text, bigint, regclass, text) IS
	'deploys a model under a name only when it beats the model the name serves, both scored now on a validation packed table by metric (NULL: the validation loss), as fit_multiple''s deploy does; returns whether the name serves it, the model served before and both scores';

-- The columns of a source and what automl makes of each: 'numeric' (a feature, standardized), 'array'
-- (one array column of numbers, the same length in every row: the features; 'image' when that length is
-- a square, side >= 4), 'categorical' (an embedding), 'sequence' (token arrays: a GRU or attention), or
-- 'skipped' with the reason.  What pack cannot take yet is skipped, never guessed.
CREATE FUNCTION pgdl.automl_columns(source regclass, label text, features text DEFAULT NULL)
RETURNS TABLE (column_name text, role text, detail text)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	col record;
	wanted text[];
	n bigint;
	d bigint;
	lo integer;
	hi integer;
	side integer;
	have_array boolean := false;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = source AND a.attname = label
					  AND a.attnum > 0 AND NOT a.attisdropped) THEN
		RAISE EXCEPTION USING ERRCODE = '42703',
			MESSAGE = pg_catalog.format('column "%s" of label does not exist in %s', pg_catalog.left(label, 64), source);
	END IF;
	IF features IS NOT NULL THEN
		SELECT pg_catalog.array_agg((pg_catalog.parse_ident(pg_catalog.btrim(f)))[1] ORDER BY o) INTO wanted
		  FROM pg_catalog.unnest(pg_catalog.string_to_array(features, ',')) WITH ORDINALITY AS u(f, o);
		IF wanted IS NULL THEN
			RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'features names no column',
				HINT = 'Give column names separated by commas, or NULL for every column but the label.';
		END IF;
		SELECT w INTO column_name FROM pg_catalog.unnest(wanted) w
		 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_attribute a WHERE a.attrelid = source AND a.attname = w
							  AND a.attnum > 0 AND NOT a.attisdropped) LIMIT 1;
		IF FOUND THEN
			RAISE EXCEPTION USING ERRCODE = '42703',
				MESSAGE = pg_catalog.format('column "%s" of features does not exist in %s', pg_catalog.left(column_name, 64), source);
		END IF;
	END IF;
	EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %s', source) INTO n;
	FOR col IN
		SELECT a.attname::text AS name, t.typname::text AS typ, et.typname::text AS elem
		  FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
		  LEFT JOIN pg_catalog.pg_type et ON et.oid = t.typelem AND t.typcategory = 'A'
		 WHERE a.attrelid = source AND a.attnum > 0 AND NOT a.attisdropped AND a.attname <> label
		   AND (wanted IS NULL OR a.attname = ANY (wanted))
		 ORDER BY CASE WHEN wanted IS NULL THEN a.attnum ELSE pg_catalog.array_position(wanted, a.attname::text) END
	LOOP
		column_name := col.name;
		role := 'skipped';
		detail := NULL;
		IF col.typ IN ('int2', 'int4', 'int8', 'text', 'varchar', 'bpchar') THEN
			EXECUTE pg_catalog.format('SELECT pg_catalog.count(DISTINCT %I) FROM %s', col.name, source) INTO d;
			IF d = n AND n > 20 AND features IS NULL THEN
				detail := 'every value is distinct: an identifier';
			ELSIF col.typ IN ('int2', 'int4', 'int8') AND d > 10 THEN
				role := 'numeric';
			ELSIF d <= 1000 THEN
				role := 'categorical';
				detail := d || ' values';
			ELSE
				detail := d || ' distinct values: too many for a category';
			END IF;
		ELSIF col.typ IN ('float4', 'float8', 'numeric') THEN
			role := 'numeric';
		ELSIF col.elem IN ('int2', 'int4', 'int8', 'float4', 'float8', 'numeric', 'text', 'varchar', 'bpchar') THEN
			EXECUTE pg_catalog.format('SELECT pg_catalog.min(pg_catalog.cardinality(%1$I)), pg_catalog.max(pg_catalog.cardinality(%1$I)) FROM %2$s',
									  col.name, source) INTO lo, hi;
			IF col.elem IN ('text', 'varchar', 'bpchar') OR (col.elem IN ('int2', 'int4', 'int8') AND lo IS DISTINCT FROM hi) THEN
				role := 'sequence';
				detail := 'up to ' || hi || ' tokens';
			ELSIF lo IS DISTINCT FROM hi OR lo = 0 THEN
				detail := 'arrays of numbers of different lengths';
			ELSIF have_array THEN
				detail := 'pack takes one array of features';
			ELSE
				have_array := true;
				side := pg_catalog.round(pg_catalog.sqrt(lo));
				role := CASE WHEN side >= 4 AND side * side = lo THEN 'image' ELSE 'array' END;
				detail := CASE WHEN role = 'image' THEN side || 'x' || side ELSE lo || ' values' END;
			END IF;
		ELSE
			detail := 'type ' || col.typ || ' is not a feature pack takes (cast it, or leave it out)';
		END IF;
		RETURN NEXT;
	END LOOP;
END
$$;
COMMENT ON FUNCTION pgdl.automl_columns(regclass, text, text) IS
	'internal to pgdl.automl: what it makes of each column of a source (numeric, array, image, categorical, sequence, or skipped and why)';

-- The architectures automl searches for a packed table, fitted to its shape: MLPs of a few widths and
-- depths on any input; small CNNs on image-shaped features; an embedding per categorical column and a
-- GRU or a self-attention block per sequence column, joined to the numeric features by concat.
CREATE FUNCTION pgdl.automl_architectures(packed regclass, image_side integer DEFAULT NULL)
RETURNS TABLE (kind text, spec jsonb)
	LANGUAGE plpgsql STABLE PARALLEL SAFE AS
$$
DECLARE
	ds record;
	n_numeric integer;
	branches jsonb := '[]';
	names jsonb := '[]';
	voc record;
	head jsonb;
	out_layer jsonb;
	w integer;
	depth integer;
	seq_kind text;
BEGIN
	SELECT d.n_features, d.task, COALESCE(pg_catalog.array_length(d.classes, 1), d.n_targets) AS outputs
	  INTO ds FROM pgdl.datasets d WHERE d.packed = automl_architectures.packed;
	out_layer := pg_catalog.jsonb_build_object('type', 'dense', 'units', ds.outputs);
	head := CASE WHEN ds.task = 'regression' THEN '{"loss": "mse"}' ELSE '{"loss": "cross_entropy"}' END;
	n_numeric := ds.n_features - COALESCE((SELECT pg_catalog.sum(COALESCE(v.length + 1, 1))
		FROM (SELECT DISTINCT ON (x.position) x.position, x.length FROM pgdl.vocabulary x
			   WHERE x.packed = automl_architectures.packed) v), 0)::integer;
	IF n_numeric = ds.n_features THEN
		FOR w, depth IN SELECT * FROM (VALUES (64, 1), (128, 1), (256, 1), (64, 2), (128, 2), (256, 2), (128, 3)) v LOOP
			kind := 'mlp';
			spec := head || pg_catalog.jsonb_build_object('input', pg_catalog.jsonb_build_array(ds.n_features),
				'layers', pgdl.automl_dense_stack(w, depth, depth > 1) || out_layer);
			RETURN NEXT;
		END LOOP;
		IF image_side IS NOT NULL THEN
			FOR w, depth IN SELECT * FROM (VALUES (16, 1), (16, 2), (32, 2)) v LOOP
				kind := 'cnn';
				spec := head || pg_catalog.jsonb_build_object('input', pg_catalog.jsonb_build_array(1, image_side, image_side),
					'layers', pgdl.automl_conv_stack(w, depth, image_side) || out_layer);
				RETURN NEXT;
			END LOOP;
		END IF;
		RETURN;
	END IF;
	-- the graph form: a slice per input kind (pack's layout: numeric, categorical ids, each sequence's ids
	-- and length), each made a flat vector, concatenated
	IF n_numeric > 0 THEN
		branches := pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object('type', 'slice', 'name', 'numeric',
			'inputs', '["input"]'::jsonb, 'start', 0, 'length', n_numeric));
		names := '["numeric"]';
	END IF;
	FOREACH seq_kind IN ARRAY ARRAY['gru', 'attention'] LOOP
		FOR w, depth IN SELECT * FROM (VALUES (64, 1), (128, 2)) v LOOP
			kind := CASE WHEN EXISTS (SELECT FROM pgdl.vocabulary x WHERE x.packed = automl_architectures.packed AND x.length IS NOT NULL)
						 THEN seq_kind ELSE 'embedding' END;
			CONTINUE WHEN kind = 'embedding' AND seq_kind = 'attention';
			spec := branches;
			FOR voc IN SELECT x.position, x.feature, x.length, pg_catalog.max(x.id) + 1 AS vocab FROM pgdl.vocabulary x
						WHERE x.packed = automl_architectures.packed GROUP BY x.position, x.feature, x.length ORDER BY x.position LOOP
				spec := spec || pgdl.automl_input_branch('in' || voc.position, voc.feature - 1, voc.length, voc.vocab::integer, seq_kind);
			END LOOP;
			spec := head || pg_catalog.jsonb_build_object('input', pg_catalog.jsonb_build_array(ds.n_features),
				'layers', spec || pg_catalog.jsonb_build_object('type', 'concat', 'inputs', names ||
					(SELECT pg_catalog.jsonb_agg('in' || p ORDER BY p) FROM (SELECT DISTINCT x.position AS p FROM pgdl.vocabulary x
						WHERE x.packed = automl_architectures.packed) q))
					|| pgdl.automl_dense_stack(w, depth, depth > 1) || out_layer);
			RETURN NEXT;
		END LOOP;
	END LOOP;
END
$$;
COMMENT ON FUNCTION pgdl.automl_architectures(regclass, integer) IS
	'internal to pgdl.automl: the architectures it searches for a packed table (MLPs; CNNs on image-shaped features; embeddings, GRUs and attention on categorical and sequence columns), by kind';

CREATE FUNCTION pgdl.automl_dense_stack(width integer, depth integer, dropout boolean) RETURNS jsonb
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$
	SELECT pg_catalog.jsonb_agg(l ORDER BY i, j) FROM pg_catalog.generate_series(1, LEAST(depth, 8)) i,
		LATERAL (VALUES (1, pg_catalog.jsonb_build_object('type', 'dense', 'units', GREATEST(width >> (i - 1), 16))),
						(2, '{"type": "relu"}'::jsonb),
						(3, CASE WHEN dropout THEN '{"type": "dropout", "rate": 0.2}'::jsonb END)) v(j, l)
	 WHERE l IS NOT NULL
$$;
COMMENT ON FUNCTION pgdl.automl_dense_stack(integer, integer, boolean) IS
	'internal to pgdl.automl: depth dense layers (width, halved each layer), ReLU, optional dropout 0.2';

CREATE FUNCTION pgdl.automl_conv_stack(filters integer, blocks integer, side integer) RETURNS jsonb
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$
	SELECT pg_catalog.jsonb_agg(l ORDER BY i, j) || '[{"type": "flatten"}, {"type": "dense", "units": 64}, {"type": "relu"}]'::jsonb
	  FROM pg_catalog.generate_series(1, LEAST(blocks, 4)) i,
		LATERAL (VALUES (1, pg_catalog.jsonb_build_object('type', 'conv2d', 'filters', filters << (i - 1), 'kernel', 3, 'padding', 1)),
						(2, '{"type": "relu"}'::jsonb),
						(3, CASE WHEN side >> i >= 2 THEN '{"type": "maxpool2d", "size": 2}'::jsonb END)) v(j, l)
	 WHERE l IS NOT NULL
$$;
COMMENT ON FUNCTION pgdl.automl_conv_stack(integer, integer, integer) IS
	'internal to pgdl.automl: blocks of 3x3 convolution (filters, doubled each block), ReLU and 2x2 max pooling while the image allows, then a dense layer of 64';

-- One categorical column (an embedding of its id) or sequence column (an embedding of its ids read by a
-- GRU, or by self-attention with learned positions and the mean over the steps), named name.
CREATE FUNCTION pgdl.automl_input_branch(name text, start integer, seq_length integer, vocab integer, seq_kind text)
RETURNS jsonb
	LANGUAGE sql IMMUTABLE PARALLEL SAFE AS
$$
	SELECT CASE
		WHEN seq_length IS NULL THEN pg_catalog.jsonb_build_array(
			pg_catalog.jsonb_build_object('type', 'slice', 'inputs', '["input"]'::jsonb, 'start', start, 'length', 1),
			pg_catalog.jsonb_build_object('type', 'embedding', 'vocab', vocab, 'dim', LEAST(16, 2 + pg_catalog.ceil(pg_catalog.sqrt(vocab))::integer)),
			pg_catalog.jsonb_build_object('type', 'flatten', 'name', name))
		WHEN seq_kind = 'gru' THEN pg_catalog.jsonb_build_array(
			pg_catalog.jsonb_build_object('type', 'slice', 'inputs', '["input"]'::jsonb, 'start', start, 'length', seq_length),
			pg_catalog.jsonb_build_object('type', 'embedding', 'vocab', vocab, 'dim', 16),
			pg_catalog.jsonb_build_object('type', 'gru', 'units', 32, 'name', name))
		ELSE pg_catalog.jsonb_build_array(
			pg_catalog.jsonb_build_object('type', 'slice', 'inputs', '["input"]'::jsonb, 'start', start, 'length', seq_length),
			pg_catalog.jsonb_build_object('type', 'embedding', 'name', name || '_tokens', 'vocab', vocab, 'dim', 16, 'positions', true),
			pg_catalog.jsonb_build_object('type', 'attention', 'name', name || '_attended', 'heads', 2),
			pg_catalog.jsonb_build_object('type', 'add', 'inputs', pg_catalog.jsonb_build_array(name || '_tokens', name || '_attended')),
			'{"type": "layernorm"}'::jsonb,
			pg_catalog.jsonb_build_object('type', 'global_avgpool', 'name', name))
	END
$$;
COMMENT ON FUNCTION pgdl.automl_input_branch(text, integer, integer, integer, text) IS
	'internal to pgdl.automl: the layers that make one categorical or sequence column a named flat vector';

-- The round r of a set named <prefix>_round<r>, else NULL.
CREATE FUNCTION pgdl.automl_round_of(prefix text, set_name text) RETURNS integer
	LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS
$$
	SELECT CASE WHEN pg_catalog.starts_with(set_name, prefix || '_round')
					 AND pg_catalog.substr(set_name, pg_catalog.length(prefix) + 7) ~ '^[0-9]{1,9}$'
				THEN pg_catalog.substr(set_name, pg_catalog.length(prefix) + 7)::integer END
$$;
COMMENT ON FUNCTION pgdl.automl_round_of(text, text) IS
	'internal to pgdl.automl: the round r of a configuration set named <prefix>_round<r>, else NULL';

-- A prefix for automl's and retrain's tables that no relation of the current schema uses yet, nor a
-- configuration set of the caller's (<prefix>_pool, <prefix>_round<r>): base, else base_2, base_3, ...  Its tables are <prefix>_raw_train, <prefix>_raw_validation (pgdl.split's, dropped
-- once packed), <prefix>_train and <prefix>_validation (packed, with partitions _p0, ...).
CREATE FUNCTION pgdl.automl_prefix(base text) RETURNS text
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	candidate text;
	k integer := 1;
BEGIN
	base := pg_catalog.left(pg_catalog.regexp_replace(pg_catalog.lower(base), '[^a-z0-9_]+', '_', 'g'), 40);
	LOOP
		candidate := base || CASE WHEN k > 1 THEN '_' || k ELSE '' END;
		EXIT WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_class c
							   WHERE c.relnamespace = pg_catalog.current_schema()::regnamespace
								 AND c.relname IN (candidate || '_raw_train', candidate || '_raw_validation',
												   candidate || '_train', candidate || '_validation', candidate || '_leaderboard',
												   candidate || '_train_p0', candidate || '_validation_p0'))
				  AND NOT EXISTS (SELECT FROM pgdl.configs c WHERE c.owner = pg_catalog.current_user()::regrole
									AND (c.set_name = candidate || '_pool' OR pgdl.automl_round_of(candidate, c.set_name) IS NOT NULL));
		k := k + 1;
	END LOOP;
	RETURN candidate;
END
$$;
COMMENT ON FUNCTION pgdl.automl_prefix(text) IS
	'internal to pgdl.automl and pgdl.retrain: a prefix for their tables that no relation of the current schema uses';

-- Split a raw table, pack the training part (with the preprocessing automl chose from the column types, or
-- a reference's) and the validation part with its preprocessing; the raw copies are dropped.  Returns the
-- packed training table's rows.
CREATE FUNCTION pgdl.automl_prepare(source regclass, label text, prefix text, validation real, seed bigint,
		workers integer, classification boolean, features text, categorical text DEFAULT NULL,
		sequence text DEFAULT NULL, reference regclass DEFAULT NULL)
RETURNS bigint
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	n bigint;
	rows_per_buffer integer;
	train regclass;
BEGIN
	PERFORM pgdl.split(source, pg_catalog.quote_ident(prefix || '_raw'), validation => validation, seed => seed,
					   stratify => CASE WHEN classification THEN label END);
	EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %I', prefix || '_raw_train') INTO n;
	rows_per_buffer := CASE WHEN n < 4000 THEN 32 ELSE 128 END;
	IF reference IS NOT NULL THEN
		-- the reference's columns, classes, normalization and vocabularies
		PERFORM pgdl.pack(pg_catalog.quote_ident(prefix || '_raw_train')::regclass, features, label, pg_catalog.quote_ident(prefix || '_train'),
						  buffer_rows => rows_per_buffer, partitions => 1, seed => seed, nulls => 'skip',
						  reference => reference);
	ELSE
		-- Preprocessing chosen from the column types: numbers standardized, text and few-valued integers as
		-- vocabularies, token arrays as sequences, rows with a NULL number skipped, a regression's target
		-- standardized.  Where pack learns imputation, min-max and robust scaling and one-hot, this is
		-- the one place to choose them.
		PERFORM pgdl.pack(pg_catalog.quote_ident(prefix || '_raw_train')::regclass, features, label, pg_catalog.quote_ident(prefix || '_train'),
						  buffer_rows => rows_per_buffer,
						  partitions => GREATEST(1, LEAST(workers, (n + rows_per_buffer - 1) / rows_per_buffer))::integer,
						  seed => seed, standardize => true, nulls => 'skip', categorical => categorical,
						  sequence => sequence, standardize_target => NOT classification);
	END IF;
	train := pg_catalog.quote_ident(prefix || '_train')::regclass;
	PERFORM pgdl.pack(pg_catalog.quote_ident(prefix || '_raw_validation')::regclass, features, label, pg_catalog.quote_ident(prefix || '_validation'),
					  buffer_rows => 256, partitions => 1, seed => seed, nulls => 'skip', reference => train);
	EXECUTE pg_catalog.format('DROP TABLE %I, %I', prefix || '_raw_train', prefix || '_raw_validation');
	RETURN (SELECT d.n_rows FROM pgdl.datasets d WHERE d.packed = train);
END
$$;
COMMENT ON FUNCTION pgdl.automl_prepare(regclass, text, text, real, bigint, integer, boolean, text, text, text, regclass) IS
	'internal to pgdl.automl and pgdl.retrain: a seeded split of the raw table, the training part packed with the preprocessing chosen from the column types (or a reference''s), the validation part with its preprocessing';

-- One round's configurations: the next k of the pool (pgdl.random_search's draws, in order) into the round's
-- set, as many as fit in `allowed` seconds by pgdl.explain_fit_multiple's prediction (the calibrated
-- profile's, or pgdl.cpu_gflops's) times `factor`, what earlier rounds measured against their predictions.
-- Fewer configurations first, then fewer epochs; k = 0 when not even one configuration for 3 epochs fits.
-- The strategy is fit_multiple's: a TPE strategy there proposes from the results of the set's earlier
-- batches, and this is where automl would hand it the rounds before.
CREATE FUNCTION pgdl.automl_round(train regclass, valid regclass, pool text, round_set text, used integer,
		INOUT k integer, INOUT epochs integer, workers integer, strategy text, factor double precision,
		allowed double precision, OUT predicted double precision)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
BEGIN
	INSERT INTO pgdl.configs (set_name, architecture, config)
	SELECT round_set, c.architecture, c.config FROM pgdl.configs c
	 WHERE c.set_name = pool AND c.owner = pg_catalog.current_user()::regrole ORDER BY c.id OFFSET used LIMIT k;
	LOOP
		SELECT e.predicted_seconds INTO predicted
		  FROM pgdl.explain_fit_multiple(train, round_set, epochs, valid, workers, strategy) e WHERE e.action = 'total';
		EXIT WHEN predicted * factor <= allowed;
		IF k > 1 THEN
			k := k / 2;
			DELETE FROM pgdl.configs c WHERE c.set_name = round_set AND c.owner = pg_catalog.current_user()::regrole
			   AND c.id > (SELECT x.id FROM pgdl.configs x WHERE x.set_name = round_set
							  AND x.owner = pg_catalog.current_user()::regrole ORDER BY x.id OFFSET k - 1 LIMIT 1);
		ELSIF epochs > 3 THEN
			epochs := GREATEST(3, epochs / 2);
		ELSE
			k := 0;
			DELETE FROM pgdl.configs c WHERE c.set_name = round_set AND c.owner = pg_catalog.current_user()::regrole;
			RETURN;
		END IF;
	END LOOP;
END
$$;
COMMENT ON FUNCTION pgdl.automl_round(regclass, regclass, text, text, integer, integer, integer, integer, text, double precision, double precision) IS
	'internal to pgdl.automl: a round''s configurations from the pool, shrunk (fewer configurations, then fewer epochs) until the predicted time times the measured factor fits the time allowed';

-- The search: rounds of fit_multiple under the budget until it is spent or the pool is.  The first round
-- may take 40% of what is left (nothing is measured yet), later ones 90%; each measured round updates the
-- factor between the predicted and the measured time (the largest of the last two: a round that took
-- longer than planned makes the next ones smaller).  The plan is a prediction; the deadline is kept by
-- fit_multiple's time_limit, after which no model of the round starts an epoch.  Returns how many models
-- it trained: each is named <prefix>_<configuration id>, of the set <prefix>_round<r>.
CREATE FUNCTION pgdl.automl_search(train regclass, valid regclass, prefix text, deadline timestamptz,
		workers integer, strategy text, metric text)
RETURNS integer
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	pool text := prefix || '_pool';
	epochs integer := pgdl.automl_epochs(train);
	pool_n integer;
	used integer := 0;
	r integer := 0;
	next_k integer := GREATEST(4, 2 * workers);
	k integer;
	e integer;
	predicted double precision;
	factor double precision := 1;
	last_factor double precision;
	allowed double precision;
	started timestamptz;
	measured double precision;
	trained integer := 0;
BEGIN
	IF deadline > pg_catalog.clock_timestamp() + interval '1 day' THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'deadline must be within a day';
	END IF;
	SELECT pg_catalog.count(*) INTO pool_n FROM pgdl.configs c
	 WHERE c.set_name = pool AND c.owner = pg_catalog.current_user()::regrole;
	LOOP
		allowed := EXTRACT(epoch FROM deadline - pg_catalog.clock_timestamp()) * CASE WHEN r = 0 THEN 0.4 ELSE 0.9 END;
		EXIT WHEN allowed <= 0.2 OR used >= pool_n;
		r := r + 1;
		k := LEAST(next_k, pool_n - used);
		e := epochs;
		SELECT x.k, x.epochs, x.predicted INTO k, e, predicted
		  FROM pgdl.automl_round(train, valid, pool, prefix || '_round' || r, used, k, e, workers, strategy, factor, allowed) x;
		EXIT WHEN k = 0;
		started := pg_catalog.clock_timestamp();
		trained := trained + (SELECT pg_catalog.count(*) FROM pgdl.fit_multiple(train, prefix || '_round' || r, e, valid,
								workers, strategy, name_prefix => prefix || '_', rank_by => metric,
								time_limit => GREATEST(deadline - pg_catalog.clock_timestamp(), interval '1 millisecond')) f);
		measured := EXTRACT(epoch FROM pg_catalog.clock_timestamp() - started);
		RAISE DEBUG 'automl round %: % configurations, % epochs, predicted % s x %, took % s', r, k, e, predicted, factor, measured;
		factor := GREATEST(measured / GREATEST(predicted, 1e-6), COALESCE(last_factor, 0));
		last_factor := measured / GREATEST(predicted, 1e-6);
		used := used + k;
		-- a round well within what was allowed: the next one may hold more configurations
		next_k := CASE WHEN measured < allowed / 4 THEN LEAST(2 * next_k, 32) ELSE next_k END;
	END LOOP;
	RETURN trained;
END
$$;
COMMENT ON FUNCTION pgdl.automl_search(regclass, regclass, text, timestamptz, integer, text, text) IS
	'internal to pgdl.automl: rounds of pgdl.fit_multiple over the configuration pool, each planned with pgdl.explain_fit_multiple and the measured factor to end before the deadline';

-- Epochs for a packed table: about 1,500 steps of 32 examples, 10 to 200.
CREATE FUNCTION pgdl.automl_epochs(train regclass) RETURNS integer
	LANGUAGE sql STABLE PARALLEL SAFE AS
$$
	SELECT LEAST(200, GREATEST(10, pg_catalog.ceil(1500.0 / pg_catalog.ceil(d.n_rows / 32.0))))::integer
	  FROM pgdl.datasets d WHERE d.packed = train
$$;
COMMENT ON FUNCTION pgdl.automl_epochs(regclass) IS
	'internal to pgdl.automl: the epochs its configurations train for on a packed table (about 1,500 steps of 32 examples, 10 to 200)';

-- The architectures for a packed table stored under names of their kind and spec (reused when the caller
-- has them already), and a pool of configurations drawn from them and a space of training settings.
CREATE FUNCTION pgdl.automl_pool(train regclass, pool text, image_side integer, seed bigint)
RETURNS integer
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	a record;
	names text[] := '{}';
	arch text;
	rows_per_buffer integer;
BEGIN
	FOR a IN SELECT * FROM pgdl.automl_architectures(train, image_side) LOOP
		arch := 'automl_' || a.kind || '_' || pg_catalog.left(pg_catalog.md5(a.spec::text), 12);
		IF NOT EXISTS (SELECT FROM pgdl.architectures x WHERE x.name = arch AND x.owner = pg_catalog.current_user()::regrole) THEN
			PERFORM pgdl.add_architecture(arch, a.spec);
		END IF;
		names := names || arch;
	END LOOP;
	SELECT d.buffer_rows INTO rows_per_buffer FROM pgdl.datasets d WHERE d.packed = train;
	RETURN pgdl.random_search(pool, names, pg_catalog.jsonb_build_object(
		'optimizer', 'adam', 'lr', '{"log_uniform": [0.0003, 0.01]}'::jsonb,
		'batch_size', pg_catalog.jsonb_build_object('choice', (SELECT pg_catalog.jsonb_agg(b) FROM pg_catalog.unnest(ARRAY[16, 32, 64, 128]) b
																 WHERE b <= rows_per_buffer AND b * 8 >= rows_per_buffer)),
		'weight_decay', '{"choice": [0, 0.0001, 0.001]}'::jsonb,
		'schedule', '{"choice": ["none", "cosine"]}'::jsonb,
		'patience', GREATEST(5, pgdl.automl_epochs(train) / 5), 'seed', seed), 500, seed);
END
$$;
COMMENT ON FUNCTION pgdl.automl_pool(regclass, text, integer, bigint) IS
	'internal to pgdl.automl: its architectures stored, and a pool of 500 configurations drawn from them and a space of Adam settings';

-- A procedure, not a function: pgdl.fit_multiple's workers are sessions of their own, which see only
-- committed tables, so the packed tables are committed before the search, and each round after it.
CREATE PROCEDURE pgdl.automl(source regclass, label text, features text DEFAULT NULL,
		budget interval DEFAULT '60 seconds', name text DEFAULT NULL, metric text DEFAULT NULL,
		seed bigint DEFAULT 0, validation real DEFAULT 0.2, workers integer DEFAULT NULL,
		strategy text DEFAULT 'asha', output_prefix text DEFAULT NULL,
		INOUT leaderboard regclass DEFAULT NULL, INOUT model bigint DEFAULT NULL, INOUT deployed boolean DEFAULT NULL)
	LANGUAGE plpgsql AS
$$
DECLARE
	started timestamptz := pg_catalog.clock_timestamp();
	cols record;
	plan record;
	prefix text;
	trained integer;
BEGIN
	SELECT * INTO plan FROM pgdl.automl_check(source, label, budget, name, seed, validation, workers, strategy, metric);
	SELECT pg_catalog.string_agg(pg_catalog.quote_ident(c.column_name), ', ') FILTER (WHERE c.role = 'numeric') AS numerics,
		   pg_catalog.min(pg_catalog.quote_ident(c.column_name)) FILTER (WHERE c.role IN ('array', 'image')) AS array_col,
		   pg_catalog.max(pg_catalog.split_part(c.detail, 'x', 1)::integer) FILTER (WHERE c.role = 'image') AS side,
		   pg_catalog.string_agg(pg_catalog.quote_ident(c.column_name), ', ') FILTER (WHERE c.role = 'categorical') AS cats,
		   pg_catalog.string_agg(pg_catalog.quote_ident(c.column_name), ', ') FILTER (WHERE c.role = 'sequence') AS seqs,
		   pg_catalog.string_agg(pg_catalog.format('%s (%s)', c.column_name, c.detail), ', ') FILTER (WHERE c.role = 'skipped') AS skipped
	  INTO cols FROM pgdl.automl_columns(source, label, features) c;
	IF cols.skipped IS NOT NULL THEN
		RAISE NOTICE 'automl leaves out %', cols.skipped USING HINT = 'Name the columns to use with features =>.';
	END IF;
	IF cols.numerics IS NULL AND cols.array_col IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '0A000', MESSAGE = pg_catalog.format('%s has no numeric column to learn from', source),
			DETAIL = 'pgdl.pack needs at least one number per row beside categorical and sequence columns.',
			HINT = 'Add a numeric column, or name the columns to use with features =>.';
	END IF;
	IF cols.array_col IS NOT NULL AND cols.numerics IS NOT NULL THEN
		RAISE NOTICE 'automl learns from array % and leaves out %', cols.array_col, cols.numerics
			USING DETAIL = 'pgdl.pack takes either one array column or numeric columns as the features.';
	END IF;
	prefix := pgdl.automl_prefix(COALESCE(output_prefix, 'automl_' || (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = source)));
	PERFORM pgdl.automl_prepare(source, label, prefix, validation, seed, plan.workers, plan.classification,
								COALESCE(cols.array_col, cols.numerics), cols.cats, cols.seqs);
	PERFORM pgdl.automl_pool(pg_catalog.quote_ident(prefix || '_train')::regclass, prefix || '_pool',
							 CASE WHEN cols.array_col IS NOT NULL THEN cols.side END, seed);
	COMMIT;
	trained := pgdl.automl_search(pg_catalog.quote_ident(prefix || '_train')::regclass,
								  pg_catalog.quote_ident(prefix || '_validation')::regclass, prefix,
								  started + budget - (budget * 0.03 + interval '0.3 seconds'), plan.workers, strategy, plan.metric);
	IF trained = 0 THEN
		RAISE EXCEPTION USING ERRCODE = '54000', MESSAGE = pg_catalog.format('a budget of %s trains no model on %s', budget, source),
			DETAIL = pg_catalog.format('%s s were left after splitting and packing; the smallest round, one configuration for 3 epochs, is predicted to take longer.',
									   pg_catalog.round(EXTRACT(epoch FROM started + budget - pg_catalog.clock_timestamp())::numeric, 1)),
			HINT = 'Give a larger budget.';
	END IF;
	EXECUTE pg_catalog.format('CREATE TABLE %I AS SELECT * FROM pgdl.automl_leaderboard($1, $2, $3, $4, $5)', prefix || '_leaderboard')
		USING prefix, pg_catalog.quote_ident(prefix || '_validation')::regclass, name, plan.metric, plan.higher;
	leaderboard := pg_catalog.quote_ident(prefix || '_leaderboard')::regclass;
	EXECUTE pg_catalog.format('SELECT l.model, l.deployed FROM %s l WHERE l.rank = 1', leaderboard) INTO model, deployed;
	RAISE NOTICE 'automl trained % models in % s of a budget of % s', trained,
		pg_catalog.round(EXTRACT(epoch FROM pg_catalog.clock_timestamp() - started)::numeric, 1), EXTRACT(epoch FROM budget)::double precision
		USING DETAIL = pg_catalog.format('Its tables: %1$s_train and %1$s_validation (packed), %1$s_leaderboard.', prefix);
END
$$;
COMMENT ON PROCEDURE pgdl.automl(regclass, text, text, interval, text, text, bigint, real, integer, text, text, regclass, bigint, boolean) IS
	'from a raw table to ranked models under a time budget: a seeded split, preprocessing chosen from the column types, architectures fitted to the data''s shape (MLPs, CNNs for image-shaped arrays, embeddings, GRU and attention), rounds of fit_multiple (strategy, asha by default) planned with explain_fit_multiple; deploys the best under name when it beats the model the name serves; returns the leaderboard table, the best model and whether it is deployed';

-- automl's arguments checked before anything is made: the task (from the label's type), the metric
-- (NULL: the validation loss, fit_multiple's rank_by: on a small validation split accuracy ties and jumps
-- by a row, the loss does not) and its direction, the workers (NULL: pgdl.max_workers).
CREATE FUNCTION pgdl.automl_check(source regclass, label text, budget interval, name text, seed bigint,
		validation real, INOUT workers integer, strategy text, INOUT metric text, OUT classification boolean,
		OUT higher boolean)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	label_type text;
	the_task text;
BEGIN
	IF source IS NULL OR label IS NULL OR budget IS NULL OR seed IS NULL OR validation IS NULL OR strategy IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22004',
			MESSAGE = 'source, label, budget, seed, validation and strategy must not be NULL';
	END IF;
	IF NOT (budget >= interval '1 second' AND budget <= interval '1 day') THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('budget must be from 1 second to 1 day, not %s', budget),
			DETAIL = 'The search plans its rounds to end within the budget, from splitting the table to deploying the winner.';
	END IF;
	IF NOT (validation >= 0.05 AND validation <= 0.5) THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('validation must be from 0.05 to 0.5, not %s', validation),
			DETAIL = 'It is the share of the rows held out to rank the models.';
	END IF;
	IF name IS NOT NULL AND pg_catalog.length(name) NOT BETWEEN 1 AND 200 THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('a deployment name must have 1 to 200 characters, not %s', pg_catalog.length(name));
	END IF;
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = source) THEN
		RAISE EXCEPTION USING ERRCODE = '42P01', MESSAGE = pg_catalog.format('relation with OID %s does not exist', source::oid);
	END IF;
	PERFORM pgdl.version();		-- loads pgdl, whose settings are read below
	workers := COALESCE(workers, pg_catalog.current_setting('pgdl.max_workers')::integer);
	SELECT t.typname INTO label_type FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
	 WHERE a.attrelid = source AND a.attname = label AND a.attnum > 0 AND NOT a.attisdropped;
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = '42703',
			MESSAGE = pg_catalog.format('column "%s" of label does not exist in %s', pg_catalog.left(label, 64), source);
	END IF;
	classification := label_type NOT IN ('float4', 'float8', 'numeric');
	the_task := CASE WHEN classification THEN 'classification' ELSE 'regression' END;
	metric := COALESCE(metric, 'loss');
	SELECT m.higher_is_better INTO higher FROM pgdl.rank_metrics() m WHERE m.metric = automl_check.metric AND m.task IN ('any', the_task);
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('metric "%s" does not rank a %s model', pg_catalog.left(metric, 64), the_task),
			HINT = (SELECT 'Rank it by ' || pg_catalog.string_agg(m.metric, ', ') || '.' FROM pgdl.rank_metrics() m WHERE m.task IN ('any', the_task));
	END IF;
END
$$;
COMMENT ON FUNCTION pgdl.automl_check(regclass, text, interval, text, bigint, real, integer, text, text) IS
	'internal to pgdl.automl: its arguments checked; the task, the metric''s direction and the workers';

-- The models of every round (named <prefix>_<configuration id>, of the sets <prefix>_round<r>) ranked by
-- their validation score (ties by validation loss; diverged ones last), the best deployed under name when it
-- beats what the name serves.
CREATE FUNCTION pgdl.automl_leaderboard(prefix text, valid regclass, name text, metric text, higher boolean)
RETURNS TABLE (rank integer, model bigint, round integer, kind text, architecture text, config jsonb,
			   epochs integer, stopped boolean, ranked_by text, score double precision, deployed boolean)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	best bigint;
	serving boolean := false;
BEGIN
	CREATE TEMP TABLE pgdl_automl_board ON COMMIT DROP AS
	SELECT (pg_catalog.row_number() OVER (ORDER BY t.diverged, t.score IS NULL,
			CASE WHEN higher THEN -t.score ELSE t.score END, t.loss, t.round, t.model))::integer AS rank, t.*
	  FROM (SELECT m.id AS model, pgdl.automl_round_of(prefix, c.set_name) AS round,
				   pg_catalog.split_part(a.name, '_', 2) AS kind, a.name AS architecture, m.config,
				   COALESCE((m.metrics ->> 'epochs_trained')::integer, (m.metrics ->> 'epoch')::integer) AS epochs,
				   COALESCE((m.metrics ->> 'stopped')::boolean, false) AS stopped,
				   COALESCE((m.metrics ->> 'diverged')::boolean, false) AS diverged,
				   (m.metrics ->> ('validation_' || metric))::double precision AS score,
				   (m.metrics ->> 'validation_loss')::double precision AS loss
			  FROM pgdl.configs c
			  JOIN pgdl.models m ON m.name = prefix || '_' || c.id AND m.owner = c.owner
			  JOIN pgdl.architectures a ON a.id = c.architecture
			 WHERE c.owner = pg_catalog.current_user()::regrole AND pgdl.automl_round_of(prefix, c.set_name) IS NOT NULL) t;
	SELECT b.model INTO best FROM pg_temp.pgdl_automl_board b WHERE b.rank = 1;
	IF name IS NOT NULL AND best IS NOT NULL THEN
		SELECT d.deployed INTO serving FROM pgdl.deploy_if_better(name, best, valid, metric) d;
	END IF;
	RETURN QUERY SELECT b.rank, b.model, b.round, b.kind, b.architecture, b.config, b.epochs, b.stopped, metric,
						b.score, serving AND b.rank = 1
				   FROM pg_temp.pgdl_automl_board b ORDER BY b.rank;
	DROP TABLE pg_temp.pgdl_automl_board;
END
$$;
COMMENT ON FUNCTION pgdl.automl_leaderboard(text, regclass, text, text, boolean) IS
	'internal to pgdl.automl: every round''s models ranked by their validation score, the best deployed under name when it beats the model the name serves';

-- pgdl.retrain: the model a deployment serves refitted on new rows (its architecture and configuration,
-- warm-started from it, packed with its training set's preprocessing), and deployed only when it beats
-- the served model on a held-out split of those rows.  A function (pgdl.fit trains in the caller's
-- transaction), so that a pg_cron job runs it as one statement.  A refit that is not deployed leaves
-- nothing behind unless kept (its packed tables and its model; pgdl.fit keeps no checkpoints): a nightly
-- job would otherwise copy the rows into new tables every night; a deployed one keeps its tables, whose
-- preprocessing it predicts with and the next retrain packs with.
CREATE FUNCTION pgdl.retrain(name text, source regclass, validation real DEFAULT 0.2, epochs integer DEFAULT NULL,
		seed bigint DEFAULT 0, metric text DEFAULT NULL, warm_start boolean DEFAULT true, keep boolean DEFAULT false)
RETURNS TABLE (previous bigint, candidate bigint, deployed boolean, ranked_by text, score double precision,
			   previous_score double precision, train regclass, valid regclass)
	LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS
$$
DECLARE
	d pgdl.deployment_names;
	m record;
	ds record;
	prefix text;
	outcome record;
BEGIN
	IF name IS NULL OR source IS NULL OR validation IS NULL OR seed IS NULL OR warm_start IS NULL OR keep IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'name, source, validation, seed, warm_start and keep must not be NULL';
	END IF;
	IF NOT (validation >= 0.05 AND validation <= 0.5) THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('validation must be from 0.05 to 0.5, not %s', validation),
			DETAIL = 'It is the share of the new rows held out to compare the refitted model with the deployed one.';
	END IF;
	IF epochs IS NOT NULL AND NOT (epochs BETWEEN 1 AND 100000) THEN
		RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = pg_catalog.format('epochs must be from 1 to 100000, not %s', epochs);
	END IF;
	d := pgdl.deployment_for_update(name);		-- its owner's, locked: one retrain of a name at a time
	SELECT x.id, x.spec, x.config, x.dataset, COALESCE((x.metrics ->> 'epochs_trained')::integer, (x.metrics ->> 'epoch')::integer) AS trained_epochs INTO m
	  FROM pgdl.models x WHERE x.id = pgdl.deployed_model(d.id);
	SELECT x.packed, x.features, x.label, x.task INTO ds FROM pgdl.datasets x WHERE x.id = m.dataset;
	IF NOT FOUND THEN
		RAISE EXCEPTION USING ERRCODE = '55000',
			MESSAGE = pg_catalog.format('model %s served by %s has no training set any more', m.id, pgdl.deployment_label(name)),
			DETAIL = 'retrain packs the new rows with the preprocessing of the model''s packed training table, which was dropped.',
			HINT = 'Train and deploy a model on a packed table that stays, then retrain.';
	END IF;
	metric := COALESCE(metric, 'loss');
	IF NOT EXISTS (SELECT FROM pgdl.rank_metrics() r WHERE r.metric = retrain.metric AND r.task IN ('any', ds.task)) THEN
		RAISE EXCEPTION USING ERRCODE = '22023',
			MESSAGE = pg_catalog.format('metric "%s" does not rank a %s model', pg_catalog.left(metric, 64), ds.task),
			HINT = (SELECT 'Rank it by ' || pg_catalog.string_agg(r.metric, ', ') || '.' FROM pgdl.rank_metrics() r WHERE r.task IN ('any', ds.task));
	END IF;
	prefix := pgdl.automl_prefix('retrain_' || pg_catalog.left(name, 24));
	PERFORM pgdl.automl_prepare(source, ds.label, prefix, validation, seed, 1, ds.task = 'classification',
								ds.features, reference => ds.packed);
	train := pg_catalog.quote_ident(prefix || '_train')::regclass;
	valid := pg_catalog.quote_ident(prefix || '_validation')::regclass;
	candidate := pgdl.fit(train, m.spec,
						  CASE WHEN warm_start THEN m.config || pg_catalog.jsonb_build_object('warm_start', m.id) ELSE m.config END,
						  COALESCE(epochs, m.trained_epochs, 10), valid);
	SELECT * INTO outcome FROM pgdl.deploy_if_better(name, candidate, valid, metric);
	IF NOT outcome.deployed AND NOT keep THEN
		PERFORM pgdl.delete_rows('pgdl.models', ARRAY[candidate]);
		EXECUTE pg_catalog.format('DROP TABLE %s, %s', train, valid);
		candidate := NULL;
		train := NULL;
		valid := NULL;
	END IF;
	previous := m.id;
	deployed := outcome.deployed;
	ranked_by := outcome.metric;
	score := outcome.score;
	previous_score := outcome.previous_score;
	RETURN NEXT;
END
$$;
COMMENT ON FUNCTION pgdl.retrain(text, regclass, real, integer, bigint, text, boolean, boolean) IS
	'refits the model a deployment serves on new rows (its architecture and configuration, warm-started from it, with its training set''s preprocessing) and deploys the refit only when it beats the served model on a held-out split of the rows; a refit not deployed is deleted with its packed tables unless keep; returns both models (the refit NULL when deleted), their scores and the new packed tables';
