"""Schemathesis hooks for `make fuzz-api` (scripts/fuzz-api.sh sets SCHEMATHESIS_HOOKS).

Two things live here: a format for the `Idempotency-Key` header, and a check that every error
code the server answers is one the document lists for that operation and status.

Why the format:

The `Idempotency-Key` header's schema names its format, `idempotency-key`, next to its pattern.
Schemathesis' coverage phase generates no valid value for a header whose pattern needs a
character other than a letter or a digit (a UUID needs `-`) unless the format is registered; it
then sends its first invalid value (`0`) in cases it counts as valid, and the server's correct
400 reads as a rejected valid request. Registering the format, with the document's own pattern
as its generator, lets it generate real keys, bare and quoted.
"""

import json
import re
from pathlib import Path

import schemathesis
from hypothesis import strategies as st

DOCUMENT = Path(__file__).resolve().parent.parent / "openapi" / "openapi.json"
FORMAT = "idempotency-key"


def _key_pattern() -> str:
    spec = json.loads(DOCUMENT.read_text())
    for item in spec["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                if schema.get("format") == FORMAT:
                    return schema["pattern"]
    raise LookupError(f"no parameter of format {FORMAT!r} in {DOCUMENT}")


# The pattern has no `$` and no flags, so Python's `re` reads it as ECMA-262 does.
schemathesis.openapi.format(FORMAT, st.from_regex(re.compile(_key_pattern()), fullmatch=True))


@schemathesis.check
def error_code_is_listed(ctx: object, response: schemathesis.Response, case: schemathesis.Case) -> None:
    """An error's `error` code is one the document lists for that operation and status.

    Every error response has the shared `ErrorBody` schema, whose `error` is the enum of every
    code, so the schema check alone accepts any known code anywhere. The codes an operation
    answers with a status are listed on that response, in `x-error-codes`: this check holds the
    server to that list (a code missing from it is a gap in `crates/raptor-api/src/codes.rs`).
    """
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        return
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return
    responses = case.operation.definition.raw.get("responses", {})
    declared = responses.get(str(response.status_code))
    if declared is None:
        # A status the operation does not declare is the status check's to judge (it allows the
        # 405 of a method probe, which the route does not answer).
        return
    listed = declared.get("x-error-codes")
    if listed is None:
        raise AssertionError(f"{response.status_code} lists no error codes in the document")
    if body["error"] not in listed:
        raise AssertionError(
            f"error code {body['error']!r} is not listed for {case.operation.label} {response.status_code}: {listed}"
        )
