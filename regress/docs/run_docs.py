#!/usr/bin/python3
"""Runs the SQL examples of pgdl's documentation and checks the output they show.

  regress/docs/run_docs.py [--setup] [--files FILE ...] [--dbname pgdl_docs] [--timeout 600] [--verbose]

Connects with psql as the environment says (PGHOST, PGPORT, PGUSER: a superuser).

What runs, in what order
  Every fenced ```sql block of README.md, then docs/user-guide.md, then the files of docs/reference in the
  order docs/reference/README.md links them, then any other docs/reference/*.md alphabetically, then
  docs/security.md (--files: just those, in the order given).  All run in ONE database (--dbname), one after another, so a block may
  use what an earlier block of the same or an earlier file made; README.md's CREATE EXTENSION pgdl creates
  the extension.  Other fenced blocks (```sh, ```text not after a sql block, plain ```) are not run.

  Each block is one psql script: psql -X -q -v ON_ERROR_STOP=1 -P footer=off, as the connecting superuser.
  An error fails the block (psql stops at it); the runner says so and goes on with the next block.
  A function's signature, a table's outline or any other text that is not SQL to run: fence it with ``` and
  no language (or ```text where no sql block comes right before it), not ```sql.

Shown output
  A ```sql block directly followed (blank lines allowed) by a ```text block: the text block is what psql
  must print, stdout and stderr together (NOTICE, WARNING and ERROR lines as psql prints them, without a
  "psql:<stdin>:N:" prefix).  Compared line by line, trailing spaces and blank lines ignored:
  - "~" right before a number (~0.87, ~1234.5, ~-3e-05) marks a figure that may move a little from machine to
    machine: a number within 5% of it, or within 0.02, whichever is larger, matches (a model at chance, 0.10,
    does not match ~0.87); a block may set its own tolerance (directive "tolerance 50%" or "tolerance 0.1").
    A figure that is any number (a timing, a rate) is shown as "..."; a class label is never masked;
  - "..." within a line matches any text;
  - a line that is only "..." matches any number of lines (none included);
  - table rows are compared cell by cell with the cells' padding removed (cells split at "|", separator
    lines like "----+------" reduced to their column count), so a masked figure of another width still
    matches a table that psql aligned differently.
  Without a text block only success is checked.

Directives: HTML comments on the lines right before a block (blank lines allowed), several per comment
separated by ";" or in several comments:
  <!-- docs: skip (reason) -->    not run; the reason is printed.  Only for what CI cannot do (a restart).
  <!-- docs: as alice -->         runs as role alice (psql -U alice).  --setup makes roles alice, bob and
                                  carol: LOGIN NOINHERIT, with CREATE on schema public of every database
                                  and SELECT on fmnist_train and fmnist_test (granted to PUBLIC).
  <!-- docs: database node1 -->   runs in database node1 (or node2) of the same server.  --setup makes
                                  node1 and node2, copies of the database with the demo data, with pgdl
                                  created in them, when a chosen file names them.
  <!-- docs: error -->            the block must fail (psql stops at an error); its shown output, error
                                  included, is compared as usual.
  <!-- docs: tolerance 10% -->     the block's "~" figures match within 10% of the shown number (or "tolerance
                                  0.05": within 0.05).
  <!-- docs: background -->       the block runs alongside the next one (a second session, e.g. one that
                                  watches pgdl.progress or stops a node): the runner starts it, runs the
                                  next block, then waits for it and checks it as usual.
  Every block gets psql variables for cluster examples that point postgres_fdw servers at this very server:
  :host (the socket directory or host name, PGHOST) and :port (PGPORT), e.g.
      CREATE SERVER node1 FOREIGN DATA WRAPPER postgres_fdw
        OPTIONS (host :'host', port :'port', dbname 'node1');
  The server trusts local connections, so a user mapping of a role that is not a superuser needs
  password_required 'false' (set by a superuser) to connect without a password.

--setup first (re)creates the database(s): drops --dbname (and node1, node2), creates it, loads Fashion-MNIST
into fmnist_train and fmnist_test (id integer, image real[], label integer) with bench/fmnist_copy.py
(Debian's dataset-fashion-mnist) and scikit-learn's breast cancer set into breast_cancer (id integer,
features double precision[], diagnosis text: 'malignant' or 'benign'), and makes the roles.  Without --setup the database is used as it is.

Prints per block "ok FILE:LINE (Ns)", "skip FILE:LINE (reason)" or "not ok FILE:LINE" with a diff of
shown and printed output (--verbose: every block's output), and ends with "N passed, N failed, N skipped";
exits 1 when a block failed.  --sabotage replaces every stored model's parameters by zeros after each block (a
model that predicts one constant class; an untrained one where the spec cannot be rebuilt from its weights): a
check of the checks, whose run must fail (CI runs it on README.md and the user guide's chapter on deployments).
"""

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ROLES = ("alice", "bob", "carol")
NODE_DATABASES = ("node1", "node2")

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
DIRECTIVE = re.compile(r"^\s*<!--\s*docs:\s*(.*?)\s*-->\s*$")
NUMBER = r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?"


class Block:
    def __init__(self, path, line, sql, directives):
        self.path = path
        self.line = line
        self.sql = sql
        self.directives = directives
        self.shown = None           # lines of the ```text block that follows, if any

    @property
    def where(self):
        return f"{os.path.relpath(self.path, ROOT)}:{self.line}"


def parse_directives(texts, where):
    """{'skip': reason, 'as': role, 'database': name, 'error': True, 'background': True} from the comments."""
    out = {}
    for text in texts:
        # split at ";" outside parentheses: a skip's reason may hold one
        for part in filter(None, (p.strip() for p in re.findall(r"(?:[^;(]|\([^)]*\))+", text))):
            word, _, rest = part.partition(" ")
            rest = rest.strip()
            if word == "skip" and rest.startswith("(") and rest.endswith(")") and len(rest) > 2:
                out["skip"] = rest[1:-1]
            elif word == "as" and re.fullmatch(r"[a-z_][a-z0-9_]*", rest):
                out["as"] = rest
            elif word == "database" and re.fullmatch(r"[a-z_][a-z0-9_]*", rest):
                out["database"] = rest
            elif word in ("error", "background") and not rest:
                out[word] = True
            elif word == "tolerance" and re.fullmatch(r"[0-9]+(\.[0-9]+)?%?", rest):
                out["tolerance"] = rest
            else:
                raise SystemExit(f"{where}: unknown docs directive: {part}")
    return out


def read_blocks(path):
    """The file's ```sql blocks, each with its directives and the ```text block that follows it."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    pending = []                # directive texts since the last non-blank line
    last = None                 # the last sql block, while only blank lines follow it
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if not m:
            d = DIRECTIVE.match(line)
            if d:
                pending.append(d.group(1))
            elif line.strip():
                pending = []
                last = None
            i += 1
            continue
        indent, fence, lang = m.groups()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1                  # the closing fence
        where = f"{os.path.relpath(path, ROOT)}:{start + 1}"
        if lang == "sql":
            last = Block(path, start + 1, "\n".join(body) + "\n", parse_directives(pending, where))
            blocks.append(last)
        elif lang == "text" and last is not None and last.shown is None:
            last.shown = body
            last = None
        else:
            last = None
        if pending and lang != "sql":
            raise SystemExit(f"{where}: a docs directive before a ```{lang or ''} block")
        pending = []
    return blocks


def default_files():
    ref = os.path.join(ROOT, "docs", "reference")
    listed = []
    with open(os.path.join(ref, "README.md"), encoding="utf-8") as f:
        for name in re.findall(r"\]\(([\w.-]+\.md)(?:#[^)]*)?\)", f.read()):
            if name != "README.md" and name not in listed and os.path.exists(os.path.join(ref, name)):
                listed.append(name)
    rest = sorted(n for n in os.listdir(ref) if n.endswith(".md") and n != "README.md" and n not in listed)
    return ([os.path.join(ROOT, "README.md"), os.path.join(ROOT, "docs", "user-guide.md")] +
            [os.path.join(ref, n) for n in listed + rest] + [os.path.join(ROOT, "docs", "security.md")])


# ---------------------------------------------------------------------------
# Comparing shown and printed output
# ---------------------------------------------------------------------------
def normalize(line):
    """A line without padding: table cells stripped, separator lines reduced to their column count."""
    line = line.rstrip()
    if re.fullmatch(r"\s*-+(\+-+)*\s*", line):
        return "+".join("-" for _ in line.split("+"))
    if "|" in line:
        return "|".join(cell.strip() for cell in line.split("|"))
    return line.strip()


DEFAULT_TOLERANCE = ("relative", 0.05)     # and never below ABSOLUTE_FLOOR
ABSOLUTE_FLOOR = 0.02


def tolerance_of(spec):
    """A block's "tolerance" directive: "N%" (relative to the shown number) or "N" (absolute)."""
    if spec is None:
        return DEFAULT_TOLERANCE
    if spec.endswith("%"):
        return ("relative", float(spec[:-1]) / 100)
    return ("absolute", float(spec))


def close_enough(shown, printed, tolerance):
    """Whether printed is within the tolerance of shown (the default: 5% of it, or 0.02, the larger)."""
    kind, amount = tolerance
    if kind == "absolute":
        allowed = amount
    elif tolerance is DEFAULT_TOLERANCE:
        allowed = max(amount * abs(shown), ABSOLUTE_FLOOR)
    else:
        allowed = amount * abs(shown)
    return abs(printed - shown) <= allowed + 1e-12


class Pattern:
    """
    A shown line: ~NUMBER matches a number within the block's tolerance of NUMBER, "..." any text,
    the rest itself.
    """

    def __init__(self, shown_line):
        out = []
        self.numbers = []
        for piece in re.split(r"(~" + NUMBER + r"|\.\.\.)", shown_line):
            if piece == "...":
                out.append(".*")
            elif piece.startswith("~") and re.fullmatch("~" + NUMBER, piece):
                out.append("(" + NUMBER + ")")
                self.numbers.append(float(piece[1:]))
            else:
                out.append(re.escape(piece))
        self.regex = re.compile("".join(out))

    def match(self, line, tolerance):
        m = self.regex.fullmatch(line)
        return m is not None and all(close_enough(shown, float(got), tolerance)
                                     for shown, got in zip(self.numbers, m.groups()))


def trim(lines):
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def matches(shown, printed, tolerance=DEFAULT_TOLERANCE):
    """Whether the printed lines are what the shown lines describe."""
    shown = [None if line.strip() == "..." else Pattern(normalize(line)) for line in shown if line.strip()]
    printed = [normalize(line) for line in printed if line.strip()]
    memo = {}

    def match(i, j):
        if (i, j) in memo:
            return memo[(i, j)]
        if i == len(shown):
            result = j == len(printed)
        elif shown[i] is None:
            result = any(match(i + 1, k) for k in range(j, len(printed) + 1))
        else:
            result = j < len(printed) and shown[i].match(printed[j], tolerance) and match(i + 1, j + 1)
        memo[(i, j)] = result
        return result

    return match(0, 0)


# ---------------------------------------------------------------------------
# psql
# ---------------------------------------------------------------------------
def psql_start(args, sql, dbname, role=None, variables=True):
    cmd = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-P", "footer=off", "-d", dbname]
    if role:
        cmd += ["-U", role]
    if variables:
        cmd += ["-v", f"host={os.environ.get('PGHOST', '')}", "-v", f"port={os.environ.get('PGPORT', '5432')}"]
    with tempfile.TemporaryFile("w+") as script:     # a file, so that psql runs while we do other things
        script.write(sql)
        script.seek(0)
        return subprocess.Popen(cmd + args, stdin=script, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)


def psql_finish(proc, timeout=None):
    """psql's exit status and output lines; kills it after timeout seconds (TimeoutExpired)."""
    try:
        out = proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    output = [re.sub(r"^psql:[^:]*:\d+: ", "", line) for line in out.split("\n")]
    return proc.returncode, output


def psql(args, sql, dbname, role=None, timeout=None, variables=True):
    return psql_finish(psql_start(args, sql, dbname, role, variables), timeout)


def must(sql, dbname="postgres"):
    rc, output = psql([], sql, dbname, variables=False)
    if rc != 0:
        raise SystemExit("setup failed:\n" + "\n".join(output))


def load_breast_cancer(dbname):
    """scikit-learn's bundled breast cancer set as breast_cancer (id, features double precision[], diagnosis)."""
    code = ("import sys\n"
            "from sklearn.datasets import load_breast_cancer\n"
            "d = load_breast_cancer()\n"
            "for i, (x, y) in enumerate(zip(d.data, d.target)):\n"
            "    print(i, '{' + ','.join(repr(float(v)) for v in x) + '}', d.target_names[y], sep='\\t')\n")
    must("CREATE TABLE breast_cancer (id integer, features double precision[], diagnosis text);", dbname)
    stream = subprocess.Popen(["/usr/bin/python3", "-c", code], stdout=subprocess.PIPE)
    load = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dbname, "-c",
                           "COPY breast_cancer FROM STDIN"], stdin=stream.stdout)
    stream.stdout.close()
    if stream.wait() != 0 or load.returncode != 0:
        raise SystemExit("setup failed: loading breast_cancer")
    must("ANALYZE breast_cancer;", dbname)


def setup(dbname, nodes):
    """A fresh database with Fashion-MNIST, the roles, and the node databases the chosen files use."""
    for db in (dbname,) + NODE_DATABASES:
        must(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE);')
    must(f'CREATE DATABASE "{dbname}";')
    for split in ("train", "test"):
        must(f"CREATE TABLE fmnist_{split} (id integer, image real[], label integer);", dbname)
        stream = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "bench", "fmnist_copy.py"), split],
                                  stdout=subprocess.PIPE)
        load = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dbname, "-c",
                               f"COPY fmnist_{split} FROM STDIN WITH (FORMAT binary)"], stdin=stream.stdout)
        stream.stdout.close()
        if stream.wait() != 0 or load.returncode != 0:
            raise SystemExit(f"setup failed: loading fmnist_{split}")
    must("ANALYZE fmnist_train; ANALYZE fmnist_test;", dbname)
    load_breast_cancer(dbname)
    for role in ROLES:
        must(f"DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{role}') THEN "
             f"CREATE ROLE {role} LOGIN NOINHERIT; END IF; END$$;")
    grant = (f"GRANT CREATE ON SCHEMA public TO {', '.join(ROLES)}; "
             "GRANT SELECT ON fmnist_train, fmnist_test TO PUBLIC;")
    must(grant, dbname)
    for node in nodes:
        must(f'CREATE DATABASE "{node}" TEMPLATE "{dbname}";')
        must("CREATE EXTENSION pgdl;", node)
    print(f"setup: database {dbname} with fmnist_train, fmnist_test and breast_cancer"
          + (f", databases {', '.join(nodes)} with pgdl" if nodes else "") + f", roles {', '.join(ROLES)}")


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------
def start_block(block, args):
    db = block.directives.get("database", args.dbname)
    return psql_start([], block.sql, db, role=block.directives.get("as")), time.monotonic()


def check_block(block, started, args):
    """None when the block did what the docs say, else what went wrong (lines); with --verbose, the output."""
    proc, start = started
    try:
        rc, output = psql_finish(proc, max(1, args.timeout - (time.monotonic() - start)))
    except subprocess.TimeoutExpired:
        return [f"timed out after {args.timeout} s"], None
    want_error = block.directives.get("error", False)
    problems = []
    if rc != 0 and not want_error:
        problems.append(f"psql exited {rc}")
    elif rc == 0 and want_error:
        problems.append("the block should end with an error but did not")
    if block.shown is not None and not matches(block.shown, output, tolerance_of(block.directives.get("tolerance"))):
        problems.append("the output differs from the one shown (--- shown, +++ printed):")
        problems += [line.rstrip("\n") for line in difflib.unified_diff(
            trim(block.shown), trim(output), "shown", "printed", lineterm="")]
    elif problems:
        problems += ["output:"] + ["  " + line for line in trim(output)]
    if args.verbose and not problems:
        return None, output
    return problems or None, None


def report(block, result, took):
    """Prints the block's line; whether it passed."""
    problems, output = result
    print(f"{'ok' if problems is None else 'not ok'} {block.where} ({took:.1f}s)")
    for line in problems or trim(output or []):
        print("    " + line)
    sys.stdout.flush()
    return problems is None


SABOTAGE = """
DO $$
DECLARE
    m record;
BEGIN
    IF to_regclass('pgdl.models') IS NULL THEN      -- before CREATE EXTENSION pgdl
        RETURN;
    END IF;
    FOR m IN SELECT id, spec, weights FROM pgdl.models LOOP
        BEGIN
            -- every parameter 0: equal outputs for every input, so one constant class (or value) predicted
            UPDATE pgdl.models SET weights = pgdl.model_from_weights(m.spec,
                (SELECT array_fill(0::real, ARRAY[sum(cardinality(w."values"))::integer])
                   FROM pgdl.model_weights(m.weights) w WHERE w.name NOT LIKE 'running\\_%'))
             WHERE id = m.id;
        EXCEPTION WHEN OTHERS THEN
            -- a spec model_from_weights cannot rebuild: an untrained model, no better than chance
            UPDATE pgdl.models SET weights = pgdl.init_model(m.spec, '{"seed": 1}') WHERE id = m.id;
        END;
    END LOOP;
END
$$;
"""


def sabotage(dbname):
    """Every stored model broken: all its parameters 0, so that it predicts one constant class."""
    rc, output = psql([], SABOTAGE, dbname, variables=False)
    if rc != 0:
        raise SystemExit("--sabotage could not break the models:\n" + "\n".join(output))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", nargs="+", help="markdown files to run, in this order (default: all docs)")
    parser.add_argument("--dbname", default="pgdl_docs")
    parser.add_argument("--setup", action="store_true", help="(re)create the database(s) and load the data first")
    parser.add_argument("--timeout", type=int, default=600, help="seconds a block may run")
    parser.add_argument("--verbose", action="store_true", help="print every block's output")
    parser.add_argument("--sabotage", action="store_true",
                        help="after every block, set every stored model's parameters to 0 (one constant class "
                             "predicted): a check of the checks, the run must then fail")
    args = parser.parse_args()

    files = [os.path.abspath(f) for f in args.files] if args.files else default_files()
    blocks = [b for f in files for b in read_blocks(f)]
    if args.setup:
        nodes = sorted({b.directives["database"] for b in blocks if "database" in b.directives})
        unknown = [n for n in nodes if n not in NODE_DATABASES]
        if unknown:
            raise SystemExit(f"unknown database in a docs directive: {', '.join(unknown)}")
        setup(args.dbname, nodes)

    runnable = [b for b in blocks if "skip" not in b.directives]
    for block, after in zip(runnable, runnable[1:] + [None]):
        if "background" in block.directives and (after is None or "background" in after.directives):
            raise SystemExit(f"{block.where}: a background block needs a block after it that is not one")

    passed = failed = skipped = 0
    background = None           # (block, its start) running alongside the current block
    for block in blocks:
        if "skip" in block.directives:
            skipped += 1
            print(f"skip {block.where} ({block.directives['skip']})")
            continue
        started = start_block(block, args)
        if "background" in block.directives:
            background = (block, started)
            continue
        ok = report(block, check_block(block, started, args), time.monotonic() - started[1])
        passed, failed = passed + ok, failed + (not ok)
        if args.sabotage:
            sabotage(args.dbname)
        if background:
            ok = report(background[0], check_block(*background, args), time.monotonic() - background[1][1])
            passed, failed = passed + ok, failed + (not ok)
            background = None
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
