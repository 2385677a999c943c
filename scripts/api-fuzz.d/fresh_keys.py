"""A schemathesis hook for scripts/api-fuzz: every request generated as valid carries an
Idempotency-Key of its own, as a client makes one per intent.

The generator draws keys from the documented pattern and draws the same few often ("0",
"!"), so a valid request under a key another body already used is answered 422
`idempotency-key-reused` (rightly: the same key for another request). The run would then
test that refusal again and again instead of orders, payments and cancellations. Requests
generated as invalid keep the keys they were given.
"""
import uuid

import schemathesis
from schemathesis import GenerationMode

KEY = "Idempotency-Key"


@schemathesis.hook
def before_call(context, case, kwargs):
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return
    if case.headers and KEY in case.headers:
        case.headers[KEY] = str(uuid.uuid4())
