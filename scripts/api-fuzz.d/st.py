"""schemathesis's command line (`st`), with one workaround.

Describing a filtered strategy, hypothesis parses the whole source file its lambda comes
from. For schemathesis's coverage module, that parse can fail with CPython 3.11's
`SystemError: AST constructor recursion depth mismatch` (seen on POST
/api/orders/{id}/payments and .../cancel, depending on the order operations are tested in).
A parse that fails that way is made again in a thread of its own, which mostly succeeds;
when that fails too, the parse is reported as the SyntaxError hypothesis expects from a
source it cannot read, and the lambda is described as `<unknown>`: the description is for
display only. Any other outcome is the parse's own.
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
        error = outcome.get("error")
        if isinstance(error, SystemError) and "recursion depth mismatch" in str(error):
            raise SyntaxError(str(error)) from error
        if error is not None:
            raise error
        return outcome["tree"]


ast.parse = parse

from schemathesis.cli import schemathesis  # noqa: E402

sys.argv[0] = "st"
sys.exit(schemathesis())
