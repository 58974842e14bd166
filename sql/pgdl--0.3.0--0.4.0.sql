-- pgdl 0.3.0 to 0.4.0 (ALTER EXTENSION pgdl UPDATE): for the clients at the other end of libpq
-- (progress of every long call, typed predictions, streaming predict_batch, BI views).
--
-- regress/t/005_upgrade.pl checks that an upgraded catalog equals a fresh 0.4.0 one.

\echo Use "ALTER EXTENSION pgdl UPDATE TO '0.4.0'" to load this file. \quit
