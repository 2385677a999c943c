"""schemathesis's command line (`st`), with one workaround.

Describing a filtered strategy, hypothesis parses the whole source file its lambda comes
from. For schemathesis's coverage module, a parse made deep in a worker's stack can fail
with CPython 3.11's `SystemError: AST constructor recursion depth mismatch` (seen on POST
/api/orders/{id}/payments, depending on the order operations are tested in), while the same
parse on a fresh stack succeeds. So a parse that fails that way is made again in a thread
of its own; any other outcome is the parse's own.
"""
import ast
import sys
import threading

_parse = ast.parse


def parse(*args, **kwargs):
    try:
        return _parse(*args, **kwargs)
    except SystemError:
        outcome = {}

        def again():
            try:
                outcome["tree"] = _parse(*args, **kwargs)
            except BaseException as e:  # handed back to the caller below
                outcome["error"] = e

        thread = threading.Thread(target=again)
        thread.start()
        thread.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["tree"]


ast.parse = parse

from schemathesis.cli import schemathesis  # noqa: E402

sys.argv[0] = "st"
sys.exit(schemathesis())
