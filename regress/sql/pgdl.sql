-- The extension itself: version, CUDA status, settings, documentation.
-- pg_regress --load-extension=pgdl has created it; this session has not loaded
-- the library yet, so the first call to a pgdl function does.

-- version() answers and agrees with the control file
SELECT pgdl.version() LIKE 'pgdl ' || extversion || ' (engine format %, blas: %, cuda: %)' AS version_matches
  FROM pg_extension WHERE extname = 'pgdl';
SELECT default_version = installed_version AS control_default_installed
  FROM pg_available_extensions WHERE name = 'pgdl';
SELECT extnamespace::regnamespace AS schema, extrelocatable
  FROM pg_extension WHERE extname = 'pgdl';

-- cuda_status() gives a reason when CUDA cannot be used (no GPU in the tests)
SELECT pgdl.cuda_status() LIKE 'available: %'
    OR pgdl.cuda_status() LIKE 'pgdl was built without CUDA support%'
    OR pgdl.cuda_status() LIKE 'no device: %' AS cuda_status_known;

-- pgdl.blas_threads
SHOW pgdl.blas_threads;
SET pgdl.blas_threads = 2;
SHOW pgdl.blas_threads;
SELECT pgdl.cuda_status() IS NOT NULL AS engine_used_with_2_threads;
RESET pgdl.blas_threads;
SHOW pgdl.blas_threads;
SELECT pgdl.cuda_status() IS NOT NULL AS engine_used_with_1_thread;
SET pgdl.blas_threads = 0;
SET pgdl.blas_threads = 65;
SHOW pgdl.blas_threads;
-- (pgdl.max_workers and pgdl.max_fit_threads default to the number of cores: shown as whether it is at least 1)
SELECT name, CASE WHEN name IN ('pgdl.max_workers', 'pgdl.max_fit_threads') THEN (setting::int >= 1)::text ELSE setting END AS setting,
       unit, context, vartype, min_val, max_val,
       CASE WHEN name IN ('pgdl.max_workers', 'pgdl.max_fit_threads') THEN (boot_val::int >= 1)::text ELSE boot_val END AS boot_val
  FROM pg_settings WHERE name LIKE 'pgdl.%' ORDER BY name;

-- the pgdl. prefix is reserved: no made-up pgdl settings
SET pgdl.foo = 1;
SHOW pgdl.foo;

-- pgdl.progress_interval: seconds between pgdl.fit's progress NOTICEs (0: every epoch, -1: none)
SET pgdl.progress_interval = '1min';
SHOW pgdl.progress_interval;
SET pgdl.progress_interval = -1;
SHOW pgdl.progress_interval;
SET pgdl.progress_interval = -2;
RESET pgdl.progress_interval;

-- deadlines of visits on nodes: a floor in seconds (at least 1), a multiple (0: no deadline)
SET pgdl.node_deadline_floor = '2min';
SHOW pgdl.node_deadline_floor;
SET pgdl.node_deadline_floor = 0;
SET pgdl.node_deadline_multiple = 0;
SHOW pgdl.node_deadline_multiple;
SET pgdl.node_deadline_multiple = -1;
SET pgdl.node_deadline_multiple = 'NaN';
SET pgdl.node_deadline_multiple = 'Infinity';
SET pgdl.node_deadline_multiple = 1e7;
RESET pgdl.node_deadline_floor;
RESET pgdl.node_deadline_multiple;

-- every function of the extension carries a comment
SELECT count(*) > 0 AS has_functions
  FROM pg_depend
 WHERE classid = 'pg_proc'::regclass AND refclassid = 'pg_extension'::regclass
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pgdl') AND deptype = 'e';
SELECT objid::regprocedure AS function_without_comment
  FROM pg_depend
 WHERE classid = 'pg_proc'::regclass AND refclassid = 'pg_extension'::regclass
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pgdl') AND deptype = 'e'
   AND obj_description(objid, 'pg_proc') IS NULL
 ORDER BY 1;

-- the functions' declared properties
SELECT p.oid::regprocedure AS function, p.provolatile, p.proisstrict, p.proparallel
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
 WHERE n.nspname = 'pgdl' AND p.proname IN ('version', 'cuda_status')
 ORDER BY p.proname;

-- every function's labels, so that a change to one is a visible diff here: kind (f function,
-- a aggregate), volatility (i immutable, s stable, v volatile), STRICT, parallel (s safe,
-- r restricted, u unsafe), SECURITY DEFINER
SELECT p.oid::regprocedure AS function, p.prokind AS kind, p.provolatile AS volatility,
       p.proisstrict AS strict, p.proparallel AS parallel, p.prosecdef AS definer
  FROM pg_proc p
  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
   AND d.refclassid = 'pg_extension'::regclass AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pgdl')
 ORDER BY p.oid::regprocedure::text COLLATE "C";

-- drop and create again: the extension's schemas go with it (its notice of the packed tables it
-- leaves lists those of the tests before: regress/t/005_upgrade.pl checks it)
SET client_min_messages = warning;
DROP EXTENSION pgdl;
RESET client_min_messages;
SELECT nspname FROM pg_namespace WHERE nspname IN ('pgdl', 'pgdl_cache');
-- a schema pgdl that is not the extension's (as pgdl 0.1.0's DROP EXTENSION left) is in the way
CREATE SCHEMA pgdl;
CREATE EXTENSION pgdl;
DROP SCHEMA pgdl;
CREATE EXTENSION pgdl;
SELECT pgdl.version() LIKE 'pgdl %' AS version_after_recreate;
SELECT pg_describe_object(classid, objid, objsubid) AS member_schema
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e' AND classid = 'pg_namespace'::regclass
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'pgdl')
 ORDER BY 1;
