-- pgdl 0.6.0 to 0.7.0 (ALTER EXTENSION pgdl UPDATE).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.7.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.7.0'" to load this file. \quit
