"""Schemathesis hooks for `make fuzz-api` (scripts/fuzz-api.sh sets SCHEMATHESIS_HOOKS).

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
