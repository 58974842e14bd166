-- pgdl install script, assembled by make from sql/parts/*.sql in name order.

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION pgdl" to load this file. \quit
