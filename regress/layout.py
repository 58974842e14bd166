#!/usr/bin/env python3
"""regress/layout.py -- the house rules docs/architecture.md states, checked (make check-layout).

1. Includes follow the folders' order.  src/ is one folder per subsystem, each exporting one header
   named after it (src/data/data.h).  A file of folder F includes headers of F, and of a folder below
   F only its exported header; src/nn (the engine) includes only itself and kernels/, and kernels/
   includes nothing of src/ but the engine's public header.  So the folder graph has no cycle.
2. No function of src/ or kernels/cpu is longer than 100 lines, from its `{` line to its `}` line.
3. docs/architecture.md names every source and script of src/, kernels/, sql/, regress/ (not
   regress/expected or the fuzz corpus), bench/ and clients/: by its path below the top folder
   (data/pack.c, t/013_jobs.pl) where two files share a name, else by its name.

Prints one line per check ("ok" or "not ok" and why) and ends with "N passed, N failed".
"""
import os
import re
import subprocess
import sys

# bottom first: a folder may include the exported header of any folder before it
ORDER = ['nn', 'base', 'spec', 'catalog', 'data', 'train', 'models', 'predict', 'plan', 'cluster', 'hopper']
MAX_LINES = 100
SCRIPT_EXT = ('.c', '.h', '.cu', '.sql', '.pl', '.py', '.sh', '.js')
NAMED_TOPS = ('src/', 'kernels/', 'sql/', 'regress/', 'bench/', 'clients/')
NOT_NAMED = ('regress/expected/', 'regress/fuzz/corpus/')

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

passed = 0
failed = 0


def report(ok, what, why=''):
    global passed, failed
    if ok:
        passed += 1
        print(f'ok     {what}')
    else:
        failed += 1
        print(f'not ok {what}: {why}')


def tracked_files():
    out = subprocess.run(['git', 'ls-files'], capture_output=True, text=True, check=True).stdout
    return [f for f in out.split('\n') if f]


def resolve(path, inc):
    """The tracked file an include names (as the compiler looks: beside the file, then -Isrc, -Ikernels), or None."""
    for cand in (os.path.join(os.path.dirname(path), inc), os.path.join('src', inc), os.path.join('kernels', inc)):
        if os.path.exists(cand):
            return os.path.normpath(cand)
    return None                 # PostgreSQL's, the system's or generated (onnx.pb-c.h)


def folder_of(path):
    """'kernels', 'nn', a glue folder, or None for src/pgdl.c."""
    parts = path.split('/')
    if parts[0] == 'kernels':
        return 'kernels'
    return parts[1] if len(parts) > 2 else None


def include_faults(path, text):
    """What is wrong with path's quoted includes, as a list of strings."""
    faults = []
    folder = folder_of(path)
    for inc in INCLUDE.findall(text):
        target = resolve(path, inc)
        if target is None or folder is None:
            continue
        to = folder_of(target)
        if to == 'kernels':
            continue            # the primitives, below everything
        if to == folder:
            if folder != 'nn' and inc != target[len('src/'):]:
                faults.append(f'"{inc}": by its path below src/ ("{target[len("src/"):]}")')
            continue
        if to == 'nn':
            if inc != 'nn/nn.h' and folder != 'nn':
                faults.append(f'"{inc}": the engine exports nn/nn.h alone')
            continue
        if folder in ('kernels', 'nn'):
            faults.append(f'"{inc}": the engine and kernels include nothing of the glue')
        elif ORDER.index(to) > ORDER.index(folder):
            faults.append(f'"{inc}": {to}/ is above {folder}/')
        elif inc != f'{to}/{to}.h':
            faults.append(f'"{inc}": of {to}/ only {to}/{to}.h is exported')
    return faults


def long_functions(text):
    """(name, lines) of each function over MAX_LINES: PostgreSQL's layout, `{` and `}` at column 0."""
    lines = text.split('\n')
    out = []
    i = 0
    while i < len(lines):
        if lines[i] == '{' and i > 0:
            j = i - 1
            while j > 0 and lines[j].strip() and not re.match(r'^[A-Za-z_][\w \*]*\(', lines[j]):
                j -= 1
            m = re.match(r'^(?:[\w \*]+\s)?\**(\w+)\(', lines[j])
            k = i + 1
            while k < len(lines) and lines[k] != '}':
                k += 1
            if m and k - i + 1 > MAX_LINES:
                out.append((m.group(1), k - i + 1))
            i = k
        i += 1
    return out


def check_sources(files):
    for path in files:
        if not path.endswith(('.c', '.h', '.cu')):
            continue
        if not (path.startswith('src/') or path.startswith('kernels/')):
            continue
        with open(path, encoding='utf-8') as f:
            text = f.read()
        faults = include_faults(path, text)
        report(not faults, f'includes of {path}', '; '.join(faults))
        if path.endswith('.c') and (path.startswith('src/') or path.startswith('kernels/cpu/')):
            longs = long_functions(text)
            report(not longs, f'function lengths of {path}',
                   ', '.join(f'{name} has {n} lines' for name, n in longs))


def check_named(files):
    with open('docs/architecture.md', encoding='utf-8') as f:
        doc = f.read()
    named = [p for p in files if p.startswith(NAMED_TOPS) and p.endswith(SCRIPT_EXT) and not p.startswith(NOT_NAMED)]
    by_name = {}
    for p in named:
        by_name.setdefault(os.path.basename(p), []).append(p)
    for p in named:
        base = os.path.basename(p)
        below_top = p.split('/', 1)[1]
        if len(by_name[base]) > 1:
            # shared names: the path below the top folder, or its last folder and the name
            forms = [below_top, '/'.join(p.split('/')[-2:])]
        else:
            forms = [base, below_top]
        ok = any(re.search(r'(?<![\w.-])' + re.escape(form) + r'(?![\w-])', doc) for form in forms)
        report(ok, f'docs/architecture.md names {p}', f'name it as {forms[0]}')


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    files = tracked_files()
    check_sources(files)
    check_named(files)
    print(f'{passed} passed, {failed} failed')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
