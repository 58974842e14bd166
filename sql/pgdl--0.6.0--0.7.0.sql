-- pgdl 0.6.0 to 0.7.0 (ALTER EXTENSION pgdl UPDATE).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.7.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.7.0'" to load this file. \quit

-- ---- lock tags and cache view names ----
-- Only the schema's owner creates in pgdl_cache now (65_feature_cache.sql): feature cache views are made
-- by pgdl's workers as that owner and given to the caller.  Caches other roles made before stay theirs.
REVOKE CREATE ON SCHEMA pgdl_cache FROM PUBLIC;
