"""Schemathesis hooks for tools/conformance/run.sh (loaded by schemathesis.toml)."""

import uuid
from urllib.parse import unquote

import schemathesis


@schemathesis.hook
def filter_path_parameters(context, path_parameters):
    """Skips generated path values that contain a percent-escape.

    schemathesis percent-decodes a path value before encoding it (so that an already-escaped
    value is sent as it is). A schema-valid user id such as `%EFab:` is therefore sent as
    `%EF%BF%BDab%3A`, which the server decodes to `\\ufffdab:` - another value, and an invalid
    one - and the valid id appears rejected. A value decoding leaves unchanged is sent exactly.
    """
    return all(
        not isinstance(value, str) or unquote(value) == value
        for value in (path_parameters or {}).values()
    )


@schemathesis.hook
def map_headers(context, headers):
    """Draws every schema-valid `Idempotency-Key` as a key of its own.

    A key says "this is the same request again": the contract answers its reuse with another
    body `422`, and its reuse with the same body with the first answer again (a resource that
    may have been deleted since). schemathesis draws keys from a small space ("0", "00", ...)
    and knows nothing of that, so it would reuse them across unrelated requests and read the
    answers as valid data rejected. A fresh key per generated request keeps every create going
    through the claim and the remembered answer; malformed keys (negative data) are sent as
    generated, and repeats and reuse are tested in local/tests/system/idempotency.rs.
    """
    if not headers:
        return headers
    for name in list(headers):
        key = headers[name]
        if (
            name.lower() == "idempotency-key"
            and isinstance(key, str)
            and 1 <= len(key) <= 255
            and all(" " <= c <= "~" for c in key)
        ):
            headers[name] = f"conformance-{uuid.uuid4()}"
    return headers
