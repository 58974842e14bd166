"""Runs the client's tests and ends with one line "N passed, N failed, N skipped" (what .ci/run counts:
a skipped test is not a pass).

    python3 clients/python/tests/run.py               # the package in this tree
    V/bin/python clients/python/tests/run.py --installed   # the package installed in V, never the tree's
"""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
tree = os.path.dirname(here)
if "--installed" in sys.argv[1:]:
    import pgdl

    if os.path.abspath(pgdl.__file__).startswith(os.path.join(tree, "")):
        print(f"--installed, but pgdl comes from this tree: {pgdl.__file__}")
        print("0 passed, 1 failed, 0 skipped")
        sys.exit(1)
    print(f"pgdl {pgdl.__version__} from {os.path.dirname(pgdl.__file__)}")
else:
    sys.path.insert(0, tree)		# the package in this tree, not an installed one

suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2).run(suite)
failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
skipped = len(result.skipped) + len(result.expectedFailures)
print(f"{result.testsRun - failed - skipped} passed, {failed} failed, {skipped} skipped")
sys.exit(0 if failed == 0 and result.testsRun > 0 else 1)
