"""Schemathesis hooks for tools/conformance/run.sh (loaded by schemathesis.toml)."""

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
