"""docs/reference/python.md: its Python examples run in order, in one namespace, without an error.

They print what the page shows and assert what it claims; this runs them against the test server.
"""
import contextlib
import io
import os
import re
import unittest

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "reference", "python.md")


def python_blocks(text):
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


class ReferencePageTest(unittest.TestCase):
    def test_examples_run_in_order(self):
        with open(PAGE, encoding="utf-8") as f:
            blocks = python_blocks(f.read())
        self.assertGreaterEqual(len(blocks), 10, "the page's examples were found")
        ns = {"__name__": "python_md"}
        try:
            for i, block in enumerate(blocks, 1):
                out = io.StringIO()
                try:
                    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                        exec(compile(block, f"python.md, example {i}", "exec"), ns)
                except Exception as e:
                    raise AssertionError(f"example {i} failed: {e!r}\n{block}\noutput:\n{out.getvalue()}") from e
            self.assertIs(type(ns["predicted"][0]), int)
            self.assertIs(type(ns["pgdl"].predict_class(ns["conn"], ns["named"], ns["points"][0])), str)
        finally:
            if "conn" in ns:
                ns["conn"].close()


if __name__ == "__main__":
    unittest.main()
