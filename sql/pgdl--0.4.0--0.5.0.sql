-- pgdl 0.4.0 to 0.5.0 (ALTER EXTENSION pgdl UPDATE): models in and out (ONNX import and export) and a
-- model zoo (pgdl.zoo, pgdl.similar_models, warm starts).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.5.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.5.0'" to load this file. \quit

-- ---- Lineage beyond training: an imported model's source, a warm start's model ----
ALTER TABLE pgdl.models ADD COLUMN origin jsonb;
