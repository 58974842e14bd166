-- "precision": "bf16": the dense layers' products of training steps in bf16 with fp32 sums, where the CPU
-- has AVX512_BF16 (docs/reference/training.md).  Where it has it: an MLP trained in bf16 and in fp32 from one
-- seed ends at close accuracies, bf16 twice gives the same bytes, and the bf16 model predicts in fp32; where
-- it lacks it, the refusal.  The CPU is asked apart from pgdl (/proc/cpuinfo), and the output is the same
-- text on both.  Every CPU: refused under pgdl.cpu_isa = avx2; hostile values.
SET client_min_messages = warning;
SELECT coalesce(max(id), 0) AS bf_first_run FROM pgdl.runs \gset
-- the tests after this one count ids from where the one before it left them: its sequences are put back at its end
CREATE TEMP TABLE bf_sequences AS
SELECT format('%I.%I', schemaname, sequencename) AS seq, coalesce(last_value, start_value) AS value,
       last_value IS NOT NULL AS called
  FROM pg_sequences WHERE schemaname = 'pgdl';

CREATE TABLE bf_rows AS
SELECT i, ARRAY[sin(i), cos(i), sin(2 * i), cos(3 * i), sin(5 * i), cos(7 * i), sin(11 * i), cos(13 * i)]::real[] AS x,
       (CASE WHEN sin(i) + cos(3 * i) > 0.5 THEN 0 WHEN sin(5 * i) > 0 THEN 1 ELSE 2 END) AS label
  FROM generate_series(1, 600) i;
SELECT pgdl.pack('bf_rows', 'x', 'label', 'bf_packed', buffer_rows => 150, partitions => 2) > 0 AS packed;
CREATE TABLE bf_spec AS SELECT '{"input": [8], "layers": [{"type": "dense", "units": 64}, {"type": "relu"},
  {"type": "dense", "units": 32}, {"type": "relu"}, {"type": "dense", "units": 3}]}'::jsonb AS spec;
\set cfg '{"lr": 0.05, "momentum": 0.9, "batch_size": 32, "seed": 7'

-- hostile values: the key named, 22023
SELECT pgdl.fit('bf_packed', spec, '{"precision": "fp16"}', 1) FROM bf_spec;
SELECT pgdl.fit('bf_packed', spec, '{"precision": "BF16"}', 1) FROM bf_spec;
SELECT pgdl.fit('bf_packed', spec, '{"precision": 16}', 1) FROM bf_spec;
SELECT pgdl.fit('bf_packed', spec, '{"precision": null}', 1) FROM bf_spec;
SELECT pgdl.fit('bf_packed', spec, '{"precision": ["bf16"]}', 1) FROM bf_spec;

-- a bf16 fit: its model's id, or how it was refused (SQLSTATE, and whether errdetail names the CPU feature)
CREATE FUNCTION pg_temp.try_bf16(cfg jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
	hint text;
	id bigint;
BEGIN
	SELECT pgdl.fit('bf_packed', spec, cfg, 6) INTO id FROM bf_spec;
	RETURN id::text;
EXCEPTION WHEN feature_not_supported THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
	RETURN format('refused: 0A000, detail names AVX512_BF16: %s, hint: %s',
				  detail LIKE '%AVX512_BF16%', hint IS NOT NULL AND hint <> '');
END $$;

-- the same through pgdl.fit_multiple (its leader refuses before a worker starts; a worker trains in bf16)
SELECT pgdl.add_architecture('bf_mlp', spec) > 0 AS stored FROM bf_spec;
INSERT INTO pgdl.configs (set_name, architecture, config)
SELECT 'bf_set', a.id, (:'cfg' || ', "precision": "bf16"}')::jsonb FROM pgdl.architectures a WHERE a.name = 'bf_mlp';
CREATE FUNCTION pg_temp.try_bf16_multiple() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	detail text;
	id bigint;
BEGIN
	SELECT model INTO id FROM pgdl.fit_multiple('bf_packed', 'bf_set', 6, workers => 1);
	RETURN id::text;
EXCEPTION WHEN feature_not_supported THEN
	GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
	RETURN format('refused: 0A000, detail names AVX512_BF16: %s', detail LIKE '%AVX512_BF16%');
END $$;

-- every CPU: pgdl.cpu_isa below avx512 refuses bf16 training
SET pgdl.cpu_isa = 'avx2';
SELECT pg_temp.try_bf16((:'cfg' || ', "precision": "bf16"}')::jsonb) AS under_avx2;
SELECT pg_temp.try_bf16_multiple() AS fit_multiple_under_avx2;
RESET pgdl.cpu_isa;

-- fp32 given is the default: the same bytes, and the canonical configuration leaves it out
SELECT pgdl.fit('bf_packed', spec, (:'cfg' || '}')::jsonb, 6) AS fp32_a FROM bf_spec \gset
SELECT pgdl.fit('bf_packed', spec, (:'cfg' || ', "precision": "fp32"}')::jsonb, 6) AS fp32_b FROM bf_spec \gset
SELECT a.weights = b.weights AS fp32_is_the_default, b.config ? 'precision' AS fp32_recorded
  FROM pgdl.models a, pgdl.models b WHERE a.id = :fp32_a AND b.id = :fp32_b;

-- the CPU, asked apart from pgdl: AVX512_BF16 and AVX-512 (pgdl.cpu_info()'s bf16 must say the same)
SELECT pg_read_file('/proc/cpuinfo') ~ 'avx512_bf16' AND pg_read_file('/proc/cpuinfo') ~ 'avx512f' AS cpu_bf16 \gset
SELECT (pgdl.cpu_info()->>'bf16')::boolean = :'cpu_bf16'::boolean AS cpu_info_agrees;
CREATE TEMP TABLE bf_outcome AS
SELECT :'cpu_bf16'::boolean AS cpu, :fp32_a::bigint AS fp32,
       pg_temp.try_bf16((:'cfg' || ', "precision": "bf16"}')::jsonb) AS a,
       pg_temp.try_bf16((:'cfg' || ', "precision": "bf16"}')::jsonb) AS b,
       pg_temp.try_bf16_multiple() AS m;

-- With AVX512_BF16: trained, the same bytes twice, through fit_multiple's worker and after a resume, not
-- fp32's bytes, accuracy within 0.02 of fp32's, "precision" recorded in the run's and the model's configuration.
-- Without it: refused, each time.  Raises otherwise, so that the output is the same on both.
DO $$
DECLARE
	o record;
	a record;
	b record;
	f record;
	stopped bigint;
	resumed bigint;
BEGIN
	SELECT * INTO o FROM bf_outcome;
	IF NOT o.cpu THEN
		IF o.a <> 'refused: 0A000, detail names AVX512_BF16: t, hint: t' OR o.b <> o.a OR
		   o.m <> 'refused: 0A000, detail names AVX512_BF16: t' THEN
			RAISE EXCEPTION 'a CPU without AVX512_BF16 trained in bf16: %, %, %', o.a, o.b, o.m;
		END IF;
		RETURN;
	END IF;
	IF o.a !~ '^\d+$' OR o.b !~ '^\d+$' OR o.m !~ '^\d+$' THEN
		RAISE EXCEPTION 'a CPU with AVX512_BF16 refused bf16: %, %, %', o.a, o.b, o.m;
	END IF;
	IF (SELECT weights FROM pgdl.models WHERE id = o.m::bigint) <> (SELECT weights FROM pgdl.models WHERE id = o.a::bigint) THEN
		RAISE EXCEPTION 'fit_multiple''s bf16 model differs from pgdl.fit''s';
	END IF;
	SELECT * INTO a FROM pgdl.models WHERE id = o.a::bigint;
	SELECT * INTO b FROM pgdl.models WHERE id = o.b::bigint;
	SELECT * INTO f FROM pgdl.models WHERE id = o.fp32;
	IF a.weights <> b.weights OR a.weights = f.weights THEN
		RAISE EXCEPTION 'bf16 twice the same bytes: %, fp32''s bytes: %', a.weights = b.weights, a.weights = f.weights;
	END IF;
	IF a.config->>'precision' IS DISTINCT FROM 'bf16' OR
	   (SELECT r.config->>'precision' FROM pgdl.runs r WHERE r.id = a.run) IS DISTINCT FROM 'bf16' THEN
		RAISE EXCEPTION 'precision not recorded: %', a.config;
	END IF;
	IF abs((a.metrics->>'train_accuracy')::float8 - (f.metrics->>'train_accuracy')::float8) > 0.02 THEN
		RAISE EXCEPTION 'bf16 accuracy % against fp32''s %', a.metrics->>'train_accuracy', f.metrics->>'train_accuracy';
	END IF;
	-- a run stopped after 5 of its 6 epochs and resumed goes on in bf16: pgdl.fit's bytes
	SELECT l.model INTO stopped FROM pgdl.fit_multiple('bf_packed', 'bf_set', 5, workers => 1) l;
	SELECT m.run INTO stopped FROM pgdl.models m WHERE m.id = stopped;	-- (the workers' rows: a later snapshot)
	UPDATE pgdl.runs SET status = 'running', epochs = 6 WHERE id = stopped;
	COMMIT;	-- the resumed run's workers write its row
	SELECT l.model INTO resumed FROM pgdl.resume(stopped) l;
	IF (SELECT weights FROM pgdl.models WHERE id = resumed) <> a.weights THEN
		RAISE EXCEPTION 'a resumed bf16 run differs from pgdl.fit''s';
	END IF;
END $$;

DELETE FROM pgdl.models WHERE run > :bf_first_run;
DELETE FROM pgdl.runs WHERE id > :bf_first_run;
DELETE FROM pgdl.configs WHERE set_name = 'bf_set';
DELETE FROM pgdl.architectures WHERE name = 'bf_mlp';
DELETE FROM pgdl.datasets WHERE packed = 'bf_packed'::regclass;
DROP TABLE bf_rows, bf_packed, bf_spec;
SELECT count(setval(seq, value, called)) > 0 AS sequences_restored FROM bf_sequences;
SELECT (SELECT count(*) FROM pgdl.runs WHERE id > :bf_first_run) AS runs_left,
       (SELECT count(*) FROM pgdl.models WHERE run > :bf_first_run) AS models_left;
