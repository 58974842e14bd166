/*
 * remote.c -- libpq connections from a coordinator to its nodes.
 *
 * Follows postgres_fdw's connection.c: the options of a postgres_fdw foreign
 * server and the caller's user mapping make the connection string; a role
 * that is not a superuser must connect with a password (so that it cannot
 * borrow the server's own trust); every wait is on the latch and the socket,
 * so cancel and termination are seen at once; an error names the server,
 * never its password or connection string.  A query still running on a node
 * when the transaction aborts (or a worker exits) is cancelled with PQcancel,
 * and the node's session is told to check that its client is there, so that
 * no remote backend trains on for a coordinator that is gone.
 */
#include "postgres.h"

#include <math.h>

#include "access/xact.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "port/pg_bswap.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "base/base.h"
#include "spec/spec.h"
#include "cluster/cluster.h"

/*
 * Unless the server's options say otherwise: a node that is unreachable is
 * found within about 15 s while we wait for it (keepalives: 5 s idle, then 3
 * probes 2 s apart) and 20 s while we send to it (tcp_user_timeout).
 */
#define NODE_CONNECT_TIMEOUT_S	"10"
#define NODE_KEEPALIVES_IDLE_S	"5"
#define NODE_KEEPALIVES_INTERVAL_S "2"
#define NODE_KEEPALIVES_COUNT	"3"
#define NODE_TCP_USER_TIMEOUT_MS "20000"	/* data sent and not acknowledged: the node is gone */

#define NODE_CANCEL_WAIT_MS		2000	/* for a cancelled query's error, before closing */
#define NODE_CANCEL_AGAIN_MS	100		/* cancel again when no answer came within this */

#define REMOTE_ECHO_BYTES		120	/* of a node's error message, detail or hint */

static List *open_nodes = NIL;	/* PgdlNode *, in TopMemoryContext */
static bool callbacks_registered = false;

/*
 * After a cancel, read the node's answer (the cancel's error) for a while
 * before closing, cancelling again now and then: a cancel that reaches the
 * node while it still reads the query (a model of megabytes) is ignored
 * there, and closed at once, the node's session may notice its lost client
 * (client_connection_check_interval) before the cancel and end with a FATAL.
 * No latch: this runs in abort and exit callbacks, where interrupts are held.
 */
static void
await_cancel(PGconn *conn, PGcancel *cancel)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), NODE_CANCEL_WAIT_MS);
	char		errbuf[256];

	for (;;)
	{
		PGresult   *res;
		ExecStatusType status;

		while (PQisBusy(conn))
		{
			long		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
			int			rc;

			if (timeout <= 0)
				return;
			rc = WaitLatchOrSocket(NULL, WL_SOCKET_READABLE | WL_TIMEOUT | WL_POSTMASTER_DEATH,
								   PQsocket(conn), Min(timeout, NODE_CANCEL_AGAIN_MS), PG_WAIT_EXTENSION);
			if (rc & WL_POSTMASTER_DEATH)
				return;
			if (rc & WL_TIMEOUT)
				(void) PQcancel(cancel, errbuf, sizeof(errbuf));
			else if (!PQconsumeInput(conn))
				return;
		}
		res = PQgetResult(conn);
		if (res == NULL)
			return;
		status = PQresultStatus(res);
		PQclear(res);
		if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH)
			return;
	}
}

static void
cancel_and_finish(PgdlNode *node)
{
	if (node->conn == NULL)
		return;
	if (node->busy || PQtransactionStatus(node->conn) == PQTRANS_ACTIVE)
	{
		PGcancel   *cancel = PQgetCancel(node->conn);
		char		errbuf[256];

		if (cancel)
		{
			/* a query we were still sending never runs: there is no answer to wait for */
			if (PQcancel(cancel, errbuf, sizeof(errbuf)) &&
				!(PQisnonblocking(node->conn) && PQflush(node->conn) != 0))
				await_cancel(node->conn, cancel);
			PQfreeCancel(cancel);
		}
	}
	PQfinish(node->conn);
	node->conn = NULL;
	node->busy = false;
}

void
pgdl_node_close(PgdlNode *node)
{
	open_nodes = list_delete_ptr(open_nodes, node);
	cancel_and_finish(node);
	pfree(node->name);
	pfree(node);
}

/* Close the nodes a transaction opened (all of them when the process exits). */
static void
close_nodes(bool all)
{
	List	   *nodes = list_copy(open_nodes);
	ListCell   *lc;

	foreach(lc, nodes)
	{
		PgdlNode   *node = lfirst(lc);

		if (all || !node->for_process)
			pgdl_node_close(node);
	}
	list_free(nodes);
}

static void
xact_callback(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PREPARE)
		close_nodes(false);
}

static void
exit_callback(int code, Datum arg)
{
	close_nodes(true);
}

Oid
pgdl_node_server(const char *name)
{
	ForeignServer *server = strlen(name) < NAMEDATALEN ? GetForeignServerByName(name, true) : NULL;
	ForeignDataWrapper *fdw;

	if (server == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("server \"%s\" does not exist", pgdl_echo(name))));
	fdw = GetForeignDataWrapper(server->fdwid);

	if (strcmp(fdw->fdwname, "postgres_fdw") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("server \"%s\" is not a postgres_fdw server", pgdl_echo(name)),
				 errdetail("Its foreign data wrapper is \"%s\"; pgdl reaches its nodes with postgres_fdw's servers.",
						   fdw->fdwname)));
	return server->serverid;
}

/* Options libpq knows, less the debug ones and those pgdl sets itself. */
static bool
is_libpq_option(const char *keyword)
{
	static PQconninfoOption *defaults = NULL;

	if (defaults == NULL)
	{
		defaults = PQconndefaults();
		if (defaults == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
	}
	if (strcmp(keyword, "fallback_application_name") == 0 || strcmp(keyword, "client_encoding") == 0)
		return false;
	for (PQconninfoOption *opt = defaults; opt->keyword; opt++)
		if (strcmp(opt->keyword, keyword) == 0)
			return strchr(opt->dispchar, 'D') == NULL;
	return false;
}

typedef struct ConnOptions
{
	const char **keywords;
	const char **values;
	int			n;
} ConnOptions;

static void
add_options(ConnOptions *o, List *options)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *d = lfirst(lc);

		if (!is_libpq_option(d->defname))
			continue;
		o->keywords[o->n] = d->defname;
		o->values[o->n] = defGetString(d);
		o->n++;
	}
}

static const char *
find_option(const ConnOptions *o, const char *keyword)
{
	for (int i = 0; i < o->n; i++)
		if (strcmp(o->keywords[i], keyword) == 0)
			return o->values[i];
	return NULL;
}

static void
add_default(ConnOptions *o, const char *keyword, const char *value)
{
	if (find_option(o, keyword) != NULL)
		return;
	o->keywords[o->n] = keyword;
	o->values[o->n] = value;
	o->n++;
}

static bool
password_required(UserMapping *um)
{
	ListCell   *lc;

	foreach(lc, um->options)
	{
		DefElem    *d = lfirst(lc);

		if (strcmp(d->defname, "password_required") == 0)
			return defGetBoolean(d);
	}
	return true;
}

/* As postgres_fdw: a role that is not a superuser gives a password, unless a superuser said it need not. */
static bool
needs_password(UserMapping *um)
{
	return !superuser_arg(um->userid) && password_required(um);
}

static void
connection_options(ForeignServer *server, UserMapping *um, ConnOptions *o)
{
	int			max = list_length(server->options) + list_length(um->options) + 10;
	const char *password;

	o->keywords = palloc0(sizeof(char *) * max);
	o->values = palloc0(sizeof(char *) * max);
	o->n = 0;
	add_options(o, server->options);
	add_options(o, um->options);
	add_default(o, "fallback_application_name", "pgdl");
	add_default(o, "client_encoding", GetDatabaseEncodingName());
	add_default(o, "keepalives", "1");
	add_default(o, "keepalives_idle", NODE_KEEPALIVES_IDLE_S);
	add_default(o, "keepalives_interval", NODE_KEEPALIVES_INTERVAL_S);
	add_default(o, "keepalives_count", NODE_KEEPALIVES_COUNT);
	add_default(o, "tcp_user_timeout", NODE_TCP_USER_TIMEOUT_MS);
	add_default(o, "connect_timeout", NODE_CONNECT_TIMEOUT_S);
	password = find_option(o, "password");
	if (needs_password(um) && (password == NULL || password[0] == '\0'))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to connect to server \"%s\"", server->servername),
				 errdetail("A role that is not a superuser must give a password in its user mapping."),
				 errhint("Add one with ALTER USER MAPPING, or have a superuser set password_required 'false' in the user mapping.")));
}

static void
register_node(PgdlNode *node)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	if (!callbacks_registered)
	{
		RegisterXactCallback(xact_callback, NULL);
		before_shmem_exit(exit_callback, (Datum) 0);
		callbacks_registered = true;
	}
	open_nodes = lappend(open_nodes, node);
	MemoryContextSwitchTo(old);
}

static void lost_connection(PgdlNode *node) pg_attribute_noreturn();
static void
lost_connection(PgdlNode *node)
{
	char	   *why = pchomp(PQerrorMessage(node->conn));

	node->busy = false;			/* nothing to cancel on a connection that is gone */
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("lost connection to server \"%s\"", node->name),
			 errdetail_internal("%s", why)));
}

/* Wait until the node's socket is ready (or the deadline, 0: none, passes); false on timeout. */
static bool
wait_for_socket(PgdlNode *node, bool write, TimestampTz deadline)
{
	int			events = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | (write ? WL_SOCKET_WRITEABLE : WL_SOCKET_READABLE);
	long		timeout = -1;
	int			rc;

	if (deadline)
	{
		timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (timeout <= 0)
			return false;
		events |= WL_TIMEOUT;
	}
	rc = WaitLatchOrSocket(MyLatch, events, PQsocket(node->conn), timeout, PG_WAIT_EXTENSION);
	if (rc & WL_LATCH_SET)
	{
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/* Wait for the node's next result; false when its deadline passed first. */
static bool
await_input(PgdlNode *node)
{
	while (PQisBusy(node->conn))
	{
		if (!wait_for_socket(node, false, node->deadline))
			return false;
		if (!PQconsumeInput(node->conn))
			lost_connection(node);
	}
	return true;
}

/* The node missed its deadline: fenced, and an error that names it. */
static void missed_deadline(PgdlNode *node) pg_attribute_noreturn();
static void
missed_deadline(PgdlNode *node)
{
	pgdl_node_fence(node);
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("server \"%s\" did not answer within its deadline", node->name),
			 errdetail("Its query was cancelled and its connection closed.")));
}

/* Read from the node until a result is ready; a node past its deadline (if any) is fenced. */
static void
wait_until_ready(PgdlNode *node)
{
	if (!await_input(node))
		missed_deadline(node);
}

/*
 * Send what libpq still holds for the node, waiting on the latch and the
 * socket: in blocking mode libpq would wait in its own poll(), which retries
 * on EINTR, so a node that stops reading (hung, or a trigger that sleeps in
 * COPY) would hold a cancel or a shutdown for as long as it does.  What the
 * node sends meanwhile is read, so that it never waits on us either.  False
 * when the node's deadline passed first.
 */
static bool
flush_output(PgdlNode *node)
{
	int			rc;

	while ((rc = PQflush(node->conn)) == 1)
	{
		int			wanted = WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE;
		long		timeout = -1;
		int			events;

		if (node->deadline)
		{
			timeout = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), node->deadline);
			if (timeout <= 0)
				return false;
			wanted |= WL_TIMEOUT;
		}
		events = WaitLatchOrSocket(MyLatch, wanted, PQsocket(node->conn), timeout, PG_WAIT_EXTENSION);
		if (events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
		if ((events & WL_SOCKET_READABLE) && !PQconsumeInput(node->conn))
			lost_connection(node);
	}
	if (rc < 0)
		lost_connection(node);
	return true;
}

/*
 * PQconnectPoll until connected, on the latch: a cancel or a shutdown is seen
 * while it connects.  libpq may have failed already (a socket file that is not
 * there, a refused port): then there is no socket to wait on.
 */
static void
poll_connection(PgdlNode *node, int timeout_s)
{
	PostgresPollingStatusType status =
		PQstatus(node->conn) == CONNECTION_BAD ? PGRES_POLLING_FAILED : PGRES_POLLING_WRITING;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_s * 1000);

	while (status != PGRES_POLLING_OK)
	{
		if (status == PGRES_POLLING_FAILED)
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to server \"%s\"", node->name),
					 errdetail_internal("%s", pchomp(PQerrorMessage(node->conn)))));
		if (!wait_for_socket(node, status == PGRES_POLLING_WRITING, deadline))
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to server \"%s\"", node->name),
					 errdetail("No connection within %d seconds.", timeout_s)));
		status = PQconnectPoll(node->conn);
	}
}

/*
 * The node's session takes this session's pgdl.cpu_isa (a node that lacks
 * that ISA refuses it, and the connection fails with its reason), and a node
 * whose kernels then differ from ours is named in a WARNING: what it trains
 * may round differently from what this server would.
 */
static void
share_cpu_isa(PgdlNode *node)
{
	const char *values[1] = {pgdl_cpu_isa_setting_name()};
	PGresult   *res;
	PgdlEngine	ours;

	PQclear(pgdl_node_exec(node, "SELECT pg_catalog.set_config('pgdl.cpu_isa', $1, false)", 1, values,
						   PGRES_TUPLES_OK));
	res = pgdl_node_exec(node, "SELECT i->>'isa', i->>'blas_core' FROM pgdl.cpu_info() i", 0, NULL, PGRES_TUPLES_OK);
	pgdl_engine_current(&ours);
	if (PQntuples(res) == 1 && PQnfields(res) == 2 &&
		(strcmp(PQgetvalue(res, 0, 0), ours.isa) != 0 || strcmp(PQgetvalue(res, 0, 1), ours.blas_core) != 0))
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("server \"%s\" runs other CPU kernels than this server", node->name),
				 errdetail("This server runs instruction set %s and BLAS kernels %s; server \"%s\" runs %s and %s. "
						   "Models trained there may not be the same bytes as models trained here.",
						   ours.isa, ours.blas_core, node->name, pgdl_clip_for_error(PQgetvalue(res, 0, 0), 32),
						   pgdl_clip_for_error(PQgetvalue(res, 0, 1), 64))));
	PQclear(res);
}

/* The node runs the same pgdl build, and its session checks that we are still there. */
static void
prepare_session(PgdlNode *node)
{
	const char *set = "SELECT pg_catalog.set_config('search_path', 'pg_catalog', false),"
		" pg_catalog.set_config('client_connection_check_interval', '1000', false)";
	PGresult   *res;
	char	   *version;

	PQclear(pgdl_node_exec(node, set, 0, NULL, PGRES_TUPLES_OK));
	res = pgdl_node_exec(node, "SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'pgdl'",
						 0, NULL, PGRES_TUPLES_OK);
	if (PQntuples(res) != 1)
	{
		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgdl is not installed on server \"%s\"", node->name),
				 errhint("Run CREATE EXTENSION pgdl in the node's database.")));
	}
	if (strcmp(PQgetvalue(res, 0, 0), PGDL_VERSION) != 0)
	{
		char	   *installed = pstrdup(pgdl_clip_for_error(PQgetvalue(res, 0, 0), 32));

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("pgdl on server \"%s\" is at version %s, not %s", node->name, installed, PGDL_VERSION),
				 errhint("Run ALTER EXTENSION pgdl UPDATE in the node's database.")));
	}
	PQclear(res);
	res = pgdl_node_exec(node, "SELECT pgdl.version()", 0, NULL, PGRES_TUPLES_OK);
	version = pstrdup(PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "");
	PQclear(res);
	if (strcmp(version, pgdl_build_description()) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("server \"%s\" runs a different pgdl build", node->name),
				 errdetail("This server runs \"%s\"; server \"%s\" runs \"%s\". Models trained across them would not be the same bytes.",
						   pgdl_build_description(), node->name, pgdl_clip_for_error(version, 200)),
				 errhint("Install the same pgdl build on every node, and ALTER EXTENSION pgdl UPDATE there.")));
	share_cpu_isa(node);
}

/* PostgreSQL's own error for a missing mapping does not say which server it looked for. */
static void
check_user_mapping(Oid user, ForeignServer *fs)
{
	if (SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(user), ObjectIdGetDatum(fs->serverid)) ||
		SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid), ObjectIdGetDatum(fs->serverid)))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("user mapping not found for \"%s\" on server \"%s\"", GetUserNameFromId(user, false),
					fs->servername),
			 errhint("CREATE USER MAPPING FOR %s SERVER %s OPTIONS (user '...', password '...').",
					 quote_identifier(GetUserNameFromId(user, false)), quote_identifier(fs->servername))));
}

PgdlNode *
pgdl_node_connect(Oid server, bool for_process)
{
	ForeignServer *fs = GetForeignServer(server);
	UserMapping *um;
	ConnOptions o;
	PgdlNode   *node;

	(void) pgdl_node_server(fs->servername);
	check_user_mapping(GetUserId(), fs);
	um = GetUserMapping(GetUserId(), server);
	connection_options(fs, um, &o);
	node = MemoryContextAllocZero(TopMemoryContext, sizeof(PgdlNode));
	node->server = server;
	node->name = MemoryContextStrdup(TopMemoryContext, fs->servername);
	node->for_process = for_process;
	node->conn = PQconnectStartParams(o.keywords, o.values, false);
	if (node->conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	register_node(node);
	poll_connection(node, Max(1, pg_strtoint32(find_option(&o, "connect_timeout"))));
	/* every send is flushed by flush_output, which stays interruptible */
	if (PQsetnonblocking(node->conn, 1) != 0)
		lost_connection(node);
	if (needs_password(um) && !PQconnectionUsedPassword(node->conn))
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to connect to server \"%s\"", node->name),
				 errdetail("A role that is not a superuser cannot connect if the node does not ask for the password."),
				 errhint("Change the node's authentication method, or have a superuser set password_required 'false' in the user mapping.")));
	prepare_session(node);
	return node;
}

void
pgdl_node_send(PgdlNode *node, const char *sql, int n_params, const char *const *values,
			   const int *lengths, const int *formats, bool binary_result)
{
	if (node->busy)
		elog(ERROR, "pgdl: a query is still running on server \"%s\"", node->name);
	if (!PQsendQueryParams(node->conn, sql, n_params, NULL, values, lengths, formats, binary_result ? 1 : 0))
		lost_connection(node);
	node->busy = true;
	node->late = !flush_output(node);
}

void
pgdl_node_set_deadline(PgdlNode *node, TimestampTz deadline)
{
	node->deadline = deadline;
	node->late = false;
}

bool
pgdl_node_await(PgdlNode *node)
{
	return !node->late && await_input(node);
}

/*
 * A node past its deadline may be hung (stopped, a stuck disk, a lock wait):
 * await_cancel's wait for its answer would be lost time.  The cancel request
 * goes on a connection of its own, so that the node's backend, once it runs
 * again, stops the visit; closing ours means a late answer is never read (and
 * client_connection_check_interval ends that backend).
 */
void
pgdl_node_fence(PgdlNode *node)
{
	if (node->conn != NULL)
	{
		PGcancel   *cancel = PQgetCancel(node->conn);
		char		errbuf[256];

		if (cancel)
		{
			(void) PQcancel(cancel, errbuf, sizeof(errbuf));
			PQfreeCancel(cancel);
		}
		PQfinish(node->conn);
	}
	node->conn = NULL;
	node->busy = false;
	node->fenced = true;
}

/* The node's error, as ours: its SQLSTATE, message, detail and hint, and which node said it. */
static void report_remote_error(PgdlNode *node, PGresult *res) pg_attribute_noreturn();
static void
report_remote_error(PgdlNode *node, PGresult *res)
{
	const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
	const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
	const char *detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
	const char *hint = PQresultErrorField(res, PG_DIAG_MESSAGE_HINT);
	int			code = ERRCODE_CONNECTION_FAILURE;
	char	   *message = pstrdup(primary ? primary : pchomp(PQerrorMessage(node->conn)));
	char	   *detail_copy = detail ? pstrdup(detail) : NULL;
	char	   *hint_copy = hint ? pstrdup(hint) : NULL;

	if (state && strlen(state) == 5)
		code = MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]);
	PQclear(res);
	/* what the node says may echo what we sent it: a line of it, not megabytes */
	ereport(ERROR,
			(errcode(code),
			 errmsg("server \"%s\": %s", node->name, pgdl_clip_for_error(message, REMOTE_ECHO_BYTES)),
			 detail_copy ? errdetail_internal("%s", pgdl_clip_for_error(detail_copy, REMOTE_ECHO_BYTES)) : 0,
			 hint_copy ? errhint("%s", pgdl_clip_for_error(hint_copy, REMOTE_ECHO_BYTES)) : 0));
}

PGresult *
pgdl_node_result(PgdlNode *node, ExecStatusType expect)
{
	PGresult   *last = NULL;
	PGresult   *res;

	for (;;)
	{
		wait_until_ready(node);
		res = PQgetResult(node->conn);
		if (res == NULL)
			break;
		if (last)
			PQclear(last);
		last = res;
	}
	node->busy = false;
	if (last == NULL)
		lost_connection(node);
	if (PQresultStatus(last) != expect)
		report_remote_error(node, last);
	return last;
}

PGresult *
pgdl_node_exec(PgdlNode *node, const char *sql, int n_params, const char *const *values, ExecStatusType expect)
{
	pgdl_node_send(node, sql, n_params, values, NULL, NULL, false);
	return pgdl_node_result(node, expect);
}

int
pgdl_node_wait_any(PgdlNode **nodes, int n)
{
	for (;;)
	{
		WaitEventSet *set;
		WaitEvent	event;
		bool		any = false;
		long		timeout;
		TimestampTz now;

		for (int i = 0; i < n; i++)
		{
			if (nodes[i] == NULL || !nodes[i]->busy)
				continue;
			any = true;
			if (!PQconsumeInput(nodes[i]->conn))
				lost_connection(nodes[i]);
			if (!PQisBusy(nodes[i]->conn))
				return i;
		}
		if (!any)
			return -1;
		timeout = -1;
		now = GetCurrentTimestamp();
		/* a node past its deadline (a hung one) is fenced; the others are waited for until the first one's */
		for (int i = 0; i < n; i++)
		{
			long		left;

			if (nodes[i] == NULL || !nodes[i]->busy || nodes[i]->deadline == 0)
				continue;
			if (nodes[i]->late || now >= nodes[i]->deadline)
				missed_deadline(nodes[i]);
			left = (long) ((nodes[i]->deadline - now + 999) / 1000);
			timeout = timeout < 0 ? left : Min(timeout, left);
		}
		set = CreateWaitEventSet(CurrentMemoryContext, n + 2);
		AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
		AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
		for (int i = 0; i < n; i++)
			if (nodes[i] && nodes[i]->busy)
				AddWaitEventToSet(set, WL_SOCKET_READABLE, PQsocket(nodes[i]->conn), NULL, NULL);
		event.events = 0;
		(void) WaitEventSetWait(set, timeout, &event, 1, PG_WAIT_EXTENSION);
		FreeWaitEventSet(set);
		if (event.events & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
}

static const char *
binary_value(const PGresult *res, int row, int col, int len)
{
	if (PQgetisnull(res, row, col) || PQgetlength(res, row, col) != len)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("a node returned an unexpected value"),
				 errdetail("Column %d of row %d is NULL or not %d bytes long.", col + 1, row + 1, len)));
	return PQgetvalue(res, row, col);
}

int64
pgdl_node_get_int64(const PGresult *res, int row, int col)
{
	uint64		v;

	memcpy(&v, binary_value(res, row, col, 8), 8);
	return (int64) pg_ntoh64(v);
}

double
pgdl_node_get_float8(const PGresult *res, int row, int col)
{
	uint64		v = (uint64) pgdl_node_get_int64(res, row, col);
	double		d;

	memcpy(&d, &v, 8);
	return d;
}

void
pgdl_node_copy_begin(PgdlNode *node, const char *copy_sql)
{
	PGresult   *res;

	pgdl_node_send(node, copy_sql, 0, NULL, NULL, NULL, false);
	wait_until_ready(node);
	res = PQgetResult(node->conn);
	if (res == NULL)
		lost_connection(node);
	if (PQresultStatus(res) != PGRES_COPY_IN)
	{
		node->busy = false;
		(void) PQgetResult(node->conn);
		report_remote_error(node, res);
	}
	PQclear(res);
}

void
pgdl_node_copy_data(PgdlNode *node, const char *data, int len)
{
	CHECK_FOR_INTERRUPTS();
	if (PQputCopyData(node->conn, data, len) != 1)
		lost_connection(node);
	(void) flush_output(node);	/* no deadline: COPY runs in the caller's statement */
}

int64
pgdl_node_copy_end(PgdlNode *node)
{
	PGresult   *res;
	int64		rows;

	if (PQputCopyEnd(node->conn, NULL) != 1)
		lost_connection(node);
	(void) flush_output(node);
	res = pgdl_node_result(node, PGRES_COMMAND_OK);
	rows = pg_strtoint64(PQcmdTuples(res));
	PQclear(res);
	return rows;
}

/* ---- pgdl.train_partitions on a node (node.c), as the model hopper and federated averaging call it ---- */

/*
 * A model (and a frozen base's prefix) goes to the node as COPY data into a
 * temporary table of the node's session, and the call reads it from there:
 * PostgreSQL logs a statement's bind parameters (log_statement = all,
 * log_min_duration_statement, log_parameter_max_length), never COPY's data,
 * so a node's log sees the statements below and the small parameters (the
 * configuration, the table, the partitions), not the model.  The table is
 * emptied by the next visit's TRUNCATE and dropped with the session.  What
 * comes back is a result row, which no log setting prints.
 */
#define NODE_BLOBS "pg_temp.pgdl_visit_blobs"
#define NODE_BLOBS_CREATE \
	"CREATE TEMPORARY TABLE pgdl_visit_blobs (k integer NOT NULL, b bytea NOT NULL);" \
	" ALTER TABLE " NODE_BLOBS " ALTER COLUMN b SET STORAGE EXTERNAL; "
#define NODE_BLOBS_COPY "TRUNCATE " NODE_BLOBS "; COPY " NODE_BLOBS " (k, b) FROM STDIN (FORMAT binary)"
#define NODE_BLOB(k) "(SELECT b FROM " NODE_BLOBS " WHERE k = " #k ")"

#define NODE_VISIT_SQL \
	"SELECT model, examples, loss_sum, correct, n, diverged" \
	" FROM pgdl.train_partitions(" NODE_BLOB(0) ", $1::jsonb, $2::regclass, $3::integer[], $4::integer, " \
	NODE_BLOB(1) ")"

#define NODE_COPY_CHUNK			(1024 * 1024)	/* of COPY data between flushes */

/* The node refused a statement: read what else it answers (in time), then its error, as ours. */
static void refuse_statement(PgdlNode *node, PGresult *res) pg_attribute_noreturn();
static void
refuse_statement(PgdlNode *node, PGresult *res)
{
	while (await_input(node))
	{
		PGresult   *more = PQgetResult(node->conn);

		if (more == NULL)
		{
			node->busy = false;
			break;
		}
		PQclear(more);
	}
	report_remote_error(node, res);
}

/* COPY data, in chunks each flushed within the node's deadline; false when it passed. */
static bool
put_copy(PgdlNode *node, const char *data, Size len)
{
	while (len > 0)
	{
		int			chunk = (int) Min(len, NODE_COPY_CHUNK);

		CHECK_FOR_INTERRUPTS();
		if (PQputCopyData(node->conn, data, chunk) != 1)
			lost_connection(node);
		if (!flush_output(node))
			return false;
		data += chunk;
		len -= chunk;
	}
	return true;
}

/* One row (k, blob) of binary COPY data. */
static bool
put_blob_row(PgdlNode *node, int32 k, const char *blob, Size len)
{
	char		head[2 + 4 + 4 + 4];
	uint16		fields = pg_hton16(2);
	uint32		k_len = pg_hton32(4),
				k_value = pg_hton32((uint32) k),
				b_len = pg_hton32((uint32) len);

	memcpy(head, &fields, 2);
	memcpy(head + 2, &k_len, 4);
	memcpy(head + 6, &k_value, 4);
	memcpy(head + 10, &b_len, 4);
	return put_copy(node, head, sizeof(head)) && put_copy(node, blob, len);
}

/*
 * The model (k 0) and the prefix (k 1, when there is one) into the node's
 * table, within the node's deadline; false when it passed (the node is then
 * late, busy, and for the caller to fence).
 */
static bool
send_blobs(PgdlNode *node, const char *model, Size model_len, const char *prefix, Size prefix_len)
{
	static const char header[19] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";
	uint16		trailer = pg_hton16((uint16) -1);
	PGresult   *res;

	if (node->busy)
		elog(ERROR, "pgdl: a query is still running on server \"%s\"", node->name);
	if (!PQsendQuery(node->conn, node->has_blobs ? NODE_BLOBS_COPY : NODE_BLOBS_CREATE NODE_BLOBS_COPY))
		lost_connection(node);
	node->busy = true;
	if (!flush_output(node))
		return false;
	for (;;)
	{
		if (!await_input(node))
			return false;
		if ((res = PQgetResult(node->conn)) == NULL)
			lost_connection(node);
		if (PQresultStatus(res) == PGRES_COPY_IN)
			break;
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			refuse_statement(node, res);
		PQclear(res);
	}
	PQclear(res);
	if (!put_copy(node, header, sizeof(header)) || !put_blob_row(node, 0, model, model_len) ||
		(prefix != NULL && !put_blob_row(node, 1, prefix, prefix_len)) ||
		!put_copy(node, (const char *) &trailer, 2))
		return false;
	if (PQputCopyEnd(node->conn, NULL) != 1)
		lost_connection(node);
	if (!flush_output(node))
		return false;
	while (await_input(node))
	{
		if ((res = PQgetResult(node->conn)) == NULL)
		{
			node->busy = false;
			node->has_blobs = true;
			return true;
		}
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			refuse_statement(node, res);
		PQclear(res);
	}
	return false;
}

void
pgdl_node_send_visit(PgdlNode *node, const char *model, Size model_len, const char *prefix, Size prefix_len,
					 const PgdlTrainConfig *config, const char *table, const int32 *parts, int n_parts,
					 int32 epochs)
{
	Jsonb	   *config_json = pgdl_config_to_jsonb(config);
	const char *values[4];
	StringInfoData array;

	if (!send_blobs(node, model, model_len, prefix, prefix_len))
	{
		node->late = true;
		return;
	}
	initStringInfo(&array);
	appendStringInfoChar(&array, '{');
	for (int i = 0; i < n_parts; i++)
		appendStringInfo(&array, "%s%d", i ? "," : "", parts[i]);
	appendStringInfoChar(&array, '}');
	values[0] = JsonbToCString(NULL, &config_json->root, VARSIZE(config_json));
	values[1] = table;
	values[2] = array.data;
	values[3] = psprintf("%d", epochs);
	pgdl_node_send(node, NODE_VISIT_SQL, 4, values, NULL, NULL, true);
}

/*
 * What a node predicts of its own pace: pgdl.estimate there, from its profile
 * (pgdl.calibrate on the node) or its pgdl.cpu_gflops.  A node is trusted
 * with data, not with the coordinator's plans: its answer must be one
 * positive finite number.
 */
double
pgdl_node_images_per_second(PgdlNode *node, Jsonb *spec, const PgdlTrainConfig *config)
{
	Jsonb	   *config_json = pgdl_config_to_jsonb(config);
	const char *values[2];
	PGresult   *res;
	double		ips = -1;

	values[0] = JsonbToCString(NULL, &spec->root, VARSIZE(spec));
	values[1] = JsonbToCString(NULL, &config_json->root, VARSIZE(config_json));
	res = pgdl_node_exec(node, "SELECT images_per_second FROM pgdl.estimate($1::jsonb, $2::jsonb)", 2, values,
						 PGRES_TUPLES_OK);
	if (PQntuples(res) == 1 && PQnfields(res) == 1 && !PQgetisnull(res, 0, 0))
	{
		char	   *end;

		ips = strtod(PQgetvalue(res, 0, 0), &end);
		if (*end != '\0')
			ips = -1;
	}
	PQclear(res);
	if (!(ips > 0 && isfinite(ips)))
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("server \"%s\" returned an unexpected result for pgdl.estimate", node->name),
				 errdetail("It must return one positive number of images per second.")));
	return ips;
}

/* ---- what a visit returns: the model sent, trained ---- */

/*
 * A node is trusted with data, not with the coordinator: of the model it was
 * sent, a visit may change the numbers that training computes (weights,
 * running statistics, optimizer state, which no check can tell from right
 * ones) and the step counter, by what the rows it reports take.  Everything
 * else must come back as it went: the architecture (and so the parameter
 * count), the seed (which orders a model's partitions and its dropout), the
 * optimizer the configuration sent names (train_begin sets it on the node)
 * and so the layout of its state.  The comparison is of the blobs' summaries
 * (nn_model_blob_check: every check of the blob reader, each count against
 * its spec), before anything is allocated by a size the node gives.  The
 * optimizer settings a configuration does not send are the blob reader's to
 * check when the model is read.
 */
typedef struct Returned
{
	const PgdlNode *node;
	const char *what;			/* "configuration 3", "round 2": what errors name */
	NnSpec	   *spec;			/* the model returned */
	NnBlobSummary sum;
	NnSpec	   *sent_spec;		/* the model sent */
	NnBlobSummary sent;
} Returned;

static void
refuse_corrupt(const Returned *r, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("server \"%s\" returned a corrupt model for %s", r->node->name, r->what),
			 errdetail("%c%s.", pg_toupper((unsigned char) detail[0]), detail + 1)));
}

/* How the returned spec differs from the sent one, as a sentence. */
static char *
spec_difference(const NnSpec *got, const NnSpec *sent)
{
	if (got->input_ndim != sent->input_ndim || memcmp(got->input, sent->input, sizeof(got->input)) != 0)
		return pstrdup("Its input shape is not the model sent's.");
	if (got->loss != sent->loss)
		return psprintf("Its loss is %s, the model sent's %s.", nn_loss_name(got->loss), nn_loss_name(sent->loss));
	if (got->n_layers != sent->n_layers)
		return psprintf("It has %d layers, the model sent %d.", got->n_layers, sent->n_layers);
	for (int i = 0; i < got->n_layers; i++)
	{
		const NnLayerSpec *g = &got->layers[i];
		const NnLayerSpec *s = &sent->layers[i];

		if (g->type != s->type)
			return psprintf("Its layer %d is %s, the model sent's %s.", i, nn_layer_type_name(g->type),
							nn_layer_type_name(s->type));
		if (memcmp(g, s, sizeof(NnLayerSpec)) != 0)
			return psprintf("Its layer %d (%s) is not the model sent's.", i, nn_layer_type_name(g->type));
	}
	return pstrdup("Its spec is not the model sent's.");
}

/*
 * The same architecture, and so the same parameter count, as the model sent
 * (the blob reader has checked each blob's counts against its own spec).
 */
static void
check_architecture(const Returned *r)
{
	if (r->sum.n_params != r->sent.n_params)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("server \"%s\" returned a model with another parameter count for %s",
						r->node->name, r->what),
				 errdetail("It has " INT64_FORMAT " parameters, the model sent " INT64_FORMAT ".",
						   r->sum.n_params, r->sent.n_params)));
	if (memcmp(r->spec, r->sent_spec, sizeof(NnSpec)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("server \"%s\" returned a model of another architecture for %s", r->node->name, r->what),
				 errdetail_internal("%s", spec_difference(r->spec, r->sent_spec))));
}

static void
refuse_optimizer(const Returned *r, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("server \"%s\" returned a model with another optimizer for %s", r->node->name, r->what),
			 errdetail_internal("%s", detail)));
}

/*
 * The configuration's optimizer, with the settings the configuration sent
 * holds for its kind (pgdl_config_to_jsonb: the others are not sent, and a
 * node's are its defaults), and the sent model's layout of its state.
 */
static void
check_optimizer(const Returned *r, const NnOptim *want)
{
	const NnOptim *got = &r->sum.optim;
	NnOptType	t = want->type;
	bool		sgd = t == NN_OPT_SGD,
				adam = t == NN_OPT_ADAM || t == NN_OPT_ADAMW,
				rmsprop = t == NN_OPT_RMSPROP,
				adagrad = t == NN_OPT_ADAGRAD;
	struct
	{
		const char *name;
		float		got,
					want;
		bool		sent;
	}			f[] = {
		{"lr", got->lr, want->lr, true},
		{"weight_decay", got->weight_decay, want->weight_decay, true},
		{"momentum", got->momentum, want->momentum, sgd || rmsprop},
		{"beta1", got->beta1, want->beta1, adam},
		{"beta2", got->beta2, want->beta2, adam},
		{"eps", got->eps, want->eps, !sgd},
		{"alpha", got->alpha, want->alpha, rmsprop},
		{"lr_decay", got->lr_decay, want->lr_decay, adagrad},
		{"initial_accumulator_value", got->initial_accumulator_value, want->initial_accumulator_value, adagrad},
	};

	if (got->type != want->type)
		refuse_optimizer(r, psprintf("It has %s, the configuration sent %s.",
									 got->type == 0 ? "none" : nn_optim_name(got->type), nn_optim_name(want->type)));
	for (int i = 0; i < lengthof(f); i++)
		if (f[i].sent && f[i].got != f[i].want)
			refuse_optimizer(r, psprintf("Its \"%s\" is %.9g, the configuration's %.9g.", f[i].name,
										 (double) f[i].got, (double) f[i].want));
	if (sgd && got->nesterov != want->nesterov)
		refuse_optimizer(r, psprintf("Its \"nesterov\" is %s, the configuration's %s.",
									 got->nesterov ? "true" : "false", want->nesterov ? "true" : "false"));
	if (rmsprop && got->centered != want->centered)
		refuse_optimizer(r, psprintf("Its \"centered\" is %s, the configuration's %s.",
									 got->centered ? "true" : "false", want->centered ? "true" : "false"));
}

static void
refuse_counts(const Returned *r, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("server \"%s\" returned a model whose step count does not match its training for %s",
					r->node->name, r->what),
			 errdetail_internal("%s", detail)));
}

/*
 * The seed, and the counters.  A visit's optimizer steps are its buffers'
 * batches, the sum over the buffers it trained of ceil(rows / batch_size) (a
 * step whose loss is not finite is not taken, nor its rows counted).  The
 * coordinator does not see the node's buffers (they are the node's data: a
 * partition attached there was packed there, in buffers of any size), only
 * the examples the node reports; each step took between 1 and batch_size of
 * them, so the steps taken are at least ceil(examples / batch_size) and at most
 * examples, which is as exact as the coordinator can know.  That refuses a
 * model returned untrained or with its counter set back, and a counter moved
 * on at will; the examples themselves stay the node's word (they weigh its
 * model in federated averaging), but must be the ones its loss figures count.
 */
static void
check_counters(const Returned *r, const PgdlVisit *v, int32 batch_size)
{
	int64		steps = r->sum.step - r->sent.step;
	int64		fewest;

	if (r->sum.seed != r->sent.seed)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("server \"%s\" returned a model with another seed for %s", r->node->name, r->what),
				 errdetail("Its seed is " UINT64_FORMAT ", the model sent's " UINT64_FORMAT ".",
						   r->sum.seed, r->sent.seed)));
	if (v->examples < 0 || v->examples != v->stats.n)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("server \"%s\" returned inconsistent example counts for %s", r->node->name, r->what),
				 errdetail("It reports " INT64_FORMAT " examples trained, and " INT64_FORMAT " in its loss figures.",
						   v->examples, v->stats.n)));
	if (steps < 0)
		refuse_counts(r, psprintf("Its step count " INT64_FORMAT " is below the model sent's, " INT64_FORMAT ".",
								  r->sum.step, r->sent.step));
	fewest = v->examples / batch_size + (v->examples % batch_size != 0);
	if (steps < fewest || steps > v->examples)
		refuse_counts(r, psprintf("It took " INT64_FORMAT " optimizer steps for the " INT64_FORMAT
								  " examples it reports; in batches of at most %d they take between "
								  INT64_FORMAT " and " INT64_FORMAT ".",
								  steps, v->examples, batch_size, fewest, v->examples));
}

/* The model a node returned (len bytes at got, in its result) against the one sent; errors name what differs. */
static void
check_returned_model(const PgdlNode *node, const char *what, const char *sent, Size sent_len, const char *got,
					 Size len, const PgdlTrainConfig *config, const PgdlVisit *v)
{
	Returned	r = {.node = node, .what = what};
	NnError		err;

	r.spec = palloc(sizeof(NnSpec));
	r.sent_spec = palloc(sizeof(NnSpec));
	if (!nn_model_blob_check((const uint8_t *) sent, sent_len, r.sent_spec, &r.sent, &err))
		elog(ERROR, "pgdl: the model sent to server \"%s\" for %s is corrupt: %s", node->name, what, err.msg);
	if (!nn_model_blob_check((const uint8_t *) got, len, r.spec, &r.sum, &err))
		refuse_corrupt(&r, err.msg);
	check_architecture(&r);
	check_optimizer(&r, &config->optim);
	check_counters(&r, v, config->batch_size);
	pfree(r.spec);
	pfree(r.sent_spec);
}

void
pgdl_node_read_visit(PgdlNode *node, const char *sent, Size sent_len, const PgdlTrainConfig *config,
					 const char *what, PgdlVisit *out)
{
	PGresult   *res = pgdl_node_result(node, PGRES_TUPLES_OK);

	PG_TRY();
	{
		if (PQntuples(res) != 1 || PQnfields(res) != 6 || PQgetisnull(res, 0, 0) || PQgetlength(res, 0, 5) != 1)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("server \"%s\" returned an unexpected result for pgdl.train_partitions", node->name),
					 errdetail("It must return one row, with a model of %zu bytes.", sent_len)));
		out->examples = pgdl_node_get_int64(res, 0, 1);
		out->stats.loss_sum = pgdl_node_get_float8(res, 0, 2);
		out->stats.correct = pgdl_node_get_int64(res, 0, 3);
		out->stats.n = pgdl_node_get_int64(res, 0, 4);
		out->diverged = PQgetvalue(res, 0, 5)[0] != 0;
		check_returned_model(node, what, sent, sent_len, PQgetvalue(res, 0, 0), PQgetlength(res, 0, 0), config, out);
		/* all that is compared the same, the size can differ only in how the blob is laid out */
		if (PQgetlength(res, 0, 0) != (int) sent_len)
			ereport(ERROR,
					(errcode(ERRCODE_PROTOCOL_VIOLATION),
					 errmsg("server \"%s\" returned an unexpected result for pgdl.train_partitions", node->name),
					 errdetail("It must return one row, with a model of %zu bytes.", sent_len)));
		out->model = palloc(VARHDRSZ + sent_len);
		SET_VARSIZE(out->model, VARHDRSZ + sent_len);
		memcpy(VARDATA(out->model), PQgetvalue(res, 0, 0), sent_len);
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
}

void
pgdl_node_keep_partitions(PgdlNode *node, int64 bytes)
{
	const char *values[1] = {psprintf(INT64_FORMAT "kB", bytes / 1024)};

	PQclear(pgdl_node_exec(node, "SELECT pg_catalog.set_config('pgdl.node_cache_mem', $1, false)", 1, values,
						   PGRES_TUPLES_OK));
}
