#!/usr/bin/env python3
"""Writes events/*.json (API Gateway REST proxy events with the caller the API's Lambda
authorizer passes on in requestContext.authorizer) and
events/manifest.json (each event's function, the status it gets against the seeded
fixtures in local/tests/events.rs, and its purpose). Run it after changing routes:
    python3 tools/make_events.py
The authorizer's events (events/authorizer-*.json) are not written here: their tokens were
signed once with a key since thrown away, whose public half is local/src/fixtures.rs's JWKS.
"""
import json
import pathlib

TENANT = "acme"
SUB = "7f3c2a10-1b2c-4d5e-8f90-a1b2c3d4e5f6"
# Fixed ids the events test seeds before each event (valid ULIDs).
PROJECT = "01JDQ5S0000000000000000P01"
FIELD = "01JDQ5S0000000000000000F01"
ISSUE = "01JDQ5S0000000000000000N01"
ISSUE_TO_DELETE = "01JDQ5S0000000000000000N02"
MISSING = "01JDQ5S0000000000000000X99"
TEAM = "01JDQ5S0000000000000000T01"
# A comment on ISSUE by SUB: its issue's id, then its own ULID.
COMMENT = ISSUE + "01JDQ5S0000000000000000C01"
# The app client the tokens were issued to (`aud`); `invoke` accepts only it, as the template's
# ALLOWED_CLIENT_IDS does in AWS.
CLIENT_ID = "5example0client0id0gridline"
ORIGIN = "https://app.example.com"

root = pathlib.Path(__file__).resolve().parent.parent / "events"


def event(method, resource, path_params=None, body=None, query=None, headers=None, claims=True,
          base_path="", claim_overrides=None):
    # API Gateway's `path` holds the parameters decoded, and behind a custom domain the base
    # path too; the router goes by `resource` and `pathParameters` instead.
    path = resource
    for k, v in (path_params or {}).items():
        path = path.replace("{" + k + "}", v)
    path = base_path + path
    hdrs = {
        "Accept": "application/json",
        "Authorization": "Bearer eyJraWQiOi...redacted",
        "Host": "abc123defg.execute-api.us-east-1.amazonaws.com",
        "User-Agent": "curl/8.5.0",
        "X-Forwarded-Proto": "https",
    }
    if body is not None:
        hdrs["Content-Type"] = "application/json"
    hdrs.update(headers or {})
    ctx = {
        "accountId": "123456789012",
        "apiId": "abc123defg",
        "resourceId": "a1b2c3",
        "resourcePath": resource,
        "httpMethod": method,
        "path": (path if base_path else "/prod" + path),
        "stage": "prod",
        "protocol": "HTTP/1.1",
        "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
        "requestTimeEpoch": 1763757723123,
        "identity": {"sourceIp": "203.0.113.10", "userAgent": "curl/8.5.0"},
    }
    if claims:
        # What the authorizer (shared/src/authorizer) puts in its context, with API
        # Gateway's own principalId and integrationLatency.
        verified = {"sub": SUB, "tenant": TENANT, "client_id": CLIENT_ID, **(claim_overrides or {})}
        ctx["authorizer"] = {"principalId": verified["sub"], "integrationLatency": 0, **verified}
    if base_path:
        ctx["domainName"] = "api.example.com"
        hdrs["Host"] = "api.example.com"
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": hdrs,
        "multiValueHeaders": {k: [v] for k, v in hdrs.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "pathParameters": path_params,
        "stageVariables": None,
        "requestContext": ctx,
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
    }


P = {"project_id": PROJECT}
EVENTS = [
    # file, function, expected status, purpose, event
    ("projects-create", "ProjectsFunction", 201, "Create a project.",
     event("POST", "/projects", body={"name": "Apollo"})),
    ("projects-create-invalid", "ProjectsFunction", 400, "A project without a name: a problem+json 400, nothing written.",
     event("POST", "/projects", body={"name": ""})),
    ("projects-list", "ProjectsFunction", 200, "List the tenant's projects by name, one page of 10.",
     event("GET", "/projects", query={"limit": "10"})),
    ("projects-get", "ProjectsFunction", 200, "Read a project with its field definitions.",
     event("GET", "/projects/{project_id}", P)),
    ("projects-get-missing", "ProjectsFunction", 404, "A project that does not exist (or is another tenant's).",
     event("GET", "/projects/{project_id}", {"project_id": MISSING})),
    ("projects-get-unauthenticated", "ProjectsFunction", 401, "No caller in the request context (no authorizer ran): 401.",
     event("GET", "/projects/{project_id}", P, claims=False)),
    ("fields-create", "ProjectsFunction", 201, "Add a select field with ordered options.",
     event("POST", "/projects/{project_id}/fields", P, body={"name": "Priority", "type": "select", "options": ["low", "medium", "high"]})),
    ("fields-list", "ProjectsFunction", 200, "List a project's fields.",
     event("GET", "/projects/{project_id}/fields", P)),
    ("fields-delete", "ProjectsFunction", 204, "Delete a field; its values disappear from every view.",
     event("DELETE", "/projects/{project_id}/fields/{field_id}", {"project_id": PROJECT, "field_id": FIELD})),
    ("issues-create", "IssuesFunction", 201, "Create an issue with a field value and an assignee.",
     event("POST", "/projects/{project_id}/issues", P, body={
         "title": "Checkout fails on Safari",
         "description": "Steps to reproduce: ...",
         "fields": {FIELD: 8},
         "participants": [{"kind": "user", "id": "bob", "role": "assignee"}],
     })),
    ("issues-create-bad-number", "IssuesFunction", 400, "A number out of DynamoDB's range: 400, nothing written.",
     event("POST", "/projects/{project_id}/issues", P, body={"title": "t", "fields": {FIELD: "1E+126"}})),
    ("issues-get", "IssuesFunction", 200, "Read an issue with its description and ETag.",
     event("GET", "/issues/{issue_id}", {"issue_id": ISSUE})),
    ("issues-patch", "IssuesFunction", 200, "Merge-patch an issue: close it and clear a field value.",
     event("PATCH", "/issues/{issue_id}", {"issue_id": ISSUE}, body={"state": "closed", "fields": {FIELD: None}})),
    ("issues-patch-stale", "IssuesFunction", 412, "PATCH with a stale If-Match: 412, nothing changed.",
     event("PATCH", "/issues/{issue_id}", {"issue_id": ISSUE}, body={"title": "late"}, headers={"If-Match": "\"7\""})),
    ("issues-delete", "IssuesFunction", 204, "Delete an issue and its description.",
     event("DELETE", "/issues/{issue_id}", {"issue_id": ISSUE_TO_DELETE})),
]

EVENTS += [
    ("grid-list", "GridFunction", 200, "The grid: issues by a custom field, descending, 10 a page.",
     event("GET", "/projects/{project_id}/issues", P, query={"sort": FIELD, "order": "desc", "limit": "10"})),
    ("grid-list-range", "GridFunction", 200, "The grid with a range: titles starting with 'check', open issues only.",
     event("GET", "/projects/{project_id}/issues", P, query={"sort": "title", "prefix": "check", "state": "open"})),
    ("grid-list-bad-sort", "GridFunction", 400, "Sorting by a column the project does not have.",
     event("GET", "/projects/{project_id}/issues", P, query={"sort": "nope"})),
]

T = {"team_id": TEAM}
EVENTS += [
    ("participants-put", "IssuesFunction", 200, "Add a team as a watcher of an issue (or change its role).",
     event("PUT", "/issues/{issue_id}/participants/{kind}/{participant_id}",
           {"issue_id": ISSUE, "kind": "team", "participant_id": TEAM}, body={"role": "watcher"})),
    ("participants-delete", "IssuesFunction", 204, "Remove the reporter from an issue.",
     event("DELETE", "/issues/{issue_id}/participants/{kind}/{participant_id}",
           {"issue_id": ISSUE, "kind": "user", "participant_id": SUB})),
    ("me-put", "PeopleFunction", 200, "Set the caller's display name.",
     event("PUT", "/me", body={"display_name": "Alice Example"})),
    ("me-get", "PeopleFunction", 200, "The caller's profile.", event("GET", "/me")),
    ("teams-create", "PeopleFunction", 201, "Create a team.", event("POST", "/teams", body={"name": "Platform"})),
    ("teams-get", "PeopleFunction", 200, "Read a team.", event("GET", "/teams/{team_id}", T)),
    ("members-put", "PeopleFunction", 204, "Add bob to a team (both directions, one transaction).",
     event("PUT", "/teams/{team_id}/members/{user_id}", {"team_id": TEAM, "user_id": "bob"})),
    ("members-delete", "PeopleFunction", 204, "Remove the caller from a team.",
     event("DELETE", "/teams/{team_id}/members/{user_id}", {"team_id": TEAM, "user_id": SUB})),
    ("members-list", "PeopleFunction", 200, "A team's members with their names.",
     event("GET", "/teams/{team_id}/members", T)),
    ("me-teams", "PeopleFunction", 200, "The caller's teams.", event("GET", "/me/teams")),
    ("users-teams", "PeopleFunction", 200, "Another user's teams.",
     event("GET", "/users/{user_id}/teams", {"user_id": SUB})),
    ("inbox-me", "InboxFunction", 200, "The caller's open issues where they are the reporter.",
     event("GET", "/me/issues", query={"state": "open", "role": "reporter"})),
    ("inbox-me-teams", "InboxFunction", 200, "Open issues of all the caller's teams, merged, each once.",
     event("GET", "/me/teams/issues", query={"limit": "20"})),
    ("inbox-team", "InboxFunction", 200, "One team's open issues.", event("GET", "/teams/{team_id}/issues", T)),
    ("inbox-me-bad-role", "InboxFunction", 400, "An unknown role in the filter.",
     event("GET", "/me/issues", query={"role": "boss"})),
]

# The issue graph and comments.
I = {"issue_id": ISSUE}
PAIR = {"issue_id": ISSUE, "other_id": ISSUE_TO_DELETE}
C = {"comment_id": COMMENT}
EVENTS += [
    ("children-list", "GridFunction", 200, "The open sub-issues of issue N01, by number, 20 a page.",
     event("GET", "/issues/{issue_id}/children", I, query={"state": "open", "limit": "20"})),
    ("relations-put", "IssuesFunction", 204,
     "Relate issue N01 to N02 with relates_to, replacing the fixtures' blocks on both sides.",
     event("PUT", "/issues/{issue_id}/relations/{kind}/{other_id}", {**PAIR, "kind": "relates_to"})),
    ("relations-delete", "IssuesFunction", 204, "Remove the fixtures' blocks relation from both issues.",
     event("DELETE", "/issues/{issue_id}/relations/{kind}/{other_id}", {**PAIR, "kind": "blocks"})),
    ("comments-create", "IssuesFunction", 201, "Comment on issue N01 as the caller.",
     event("POST", "/issues/{issue_id}/comments", I, body={"body": "Reproduced on Safari 17 too."})),
    ("comments-create-empty", "IssuesFunction", 400, "An empty comment: a problem+json 400, nothing written.",
     event("POST", "/issues/{issue_id}/comments", I, body={"body": ""})),
    ("history-list", "GridFunction", 200, "Issue N01's history, newest first: one entry per version, with its changes and actor.",
     event("GET", "/issues/{issue_id}/history", I, query={"limit": "20"})),
    ("comments-list", "IssuesFunction", 200, "Issue N01's comments, newest first, 20 a page, with the authors' names.",
     event("GET", "/issues/{issue_id}/comments", I, query={"order": "desc", "limit": "20"})),
    ("comments-edit", "IssuesFunction", 200, "The caller edits their own comment.",
     event("PATCH", "/comments/{comment_id}", C, body={"body": "Reproduced on Safari 17 and 18."})),
    ("comments-delete", "IssuesFunction", 204, "The caller deletes their own comment.",
     event("DELETE", "/comments/{comment_id}", C)),
]

# Routing from the resource: a custom domain's base path, and ids with characters a path encodes.
EVENTS += [
    ("projects-get-custom-domain", "ProjectsFunction", 200,
     "Behind a custom domain with base path /v1: `path` starts with it, the route comes from `resource`.",
     event("GET", "/projects/{project_id}", P, base_path="/v1")),
    ("users-teams-encoded-id", "PeopleFunction", 200,
     "A user id holding '/', '?' and '%' (decoded in `pathParameters`): routed by resource, not by path.",
     event("GET", "/users/{user_id}/teams", {"user_id": "svc/ci?x%y"})),
]

# A caller the functions refuse although an authorizer passed it on.
EVENTS += [
    ("projects-get-other-client", "ProjectsFunction", 401,
     "The authorizer passed on a client not in the function's ALLOWED_CLIENT_IDS: 401 (the check is kept in the functions too).",
     event("GET", "/projects/{project_id}", P, claim_overrides={"client_id": "someotherappclient"})),
]

# CORS preflights: no token (the OPTIONS methods have no authorizer), answered before routing.
PREFLIGHT = {"Origin": ORIGIN, "Access-Control-Request-Method": "PATCH",
             "Access-Control-Request-Headers": "authorization,content-type,if-match"}
EVENTS += [
    ("cors-preflight-issue", "IssuesFunction", 204,
     "A browser's preflight for PATCH /issues/{id} from an allowed origin: 204 with the Allow-* headers.",
     event("OPTIONS", "/issues/{issue_id}", {"issue_id": ISSUE}, headers=PREFLIGHT, claims=False)),
    ("cors-preflight-grid", "GridFunction", 204,
     "A preflight for the grid from an allowed origin.",
     event("OPTIONS", "/projects/{project_id}/issues", P, claims=False,
           headers={**PREFLIGHT, "Access-Control-Request-Method": "GET"})),
]

STREAM_ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/gridline-RecordsTable/stream/2026-11-21T00:00:00.000"
NEW_ISSUE = "01JDQ5S0000000000000000N05"


def issue_image(issue_id, version, title, points=None, state="open", num=5):
    fields = {FIELD: {"N": str(points)}} if points is not None else {}
    return {
        "PK": {"S": f"T#{TENANT}#I#{issue_id}"}, "SK": {"S": "#ISSUE"},
        "GSI1PK": {"S": f"T#{TENANT}#P#{PROJECT}#ISSUES"}, "GSI1SK": {"S": f"{num:020}"},
        "entity": {"S": "issue"}, "id": {"S": issue_id}, "project_id": {"S": PROJECT},
        "num": {"N": str(num)}, "title": {"S": title}, "state": {"S": state},
        "version": {"N": str(version)}, "fields": {"M": fields},
        "participants": {"SS": [f"user#{SUB}"]},
        "roles": {"M": {f"user#{SUB}": {"S": "reporter"}}},
        "created_at": {"S": "2026-11-21T20:42:03.123Z"},
        "updated_at": {"S": f"2026-11-21T20:42:0{version}.000Z"},
        "updated_by": {"S": SUB},
    }


def record(seq, name, old, new, issue_id=NEW_ISSUE):
    change = {
        "ApproximateCreationDateTime": 1763757723,
        "Keys": {"PK": {"S": f"T#{TENANT}#I#{issue_id}"}, "SK": {"S": "#ISSUE"}},
        "SequenceNumber": seq, "SizeBytes": 512, "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    # The index reads NewImage; an issue's history entry is the difference from OldImage.
    if new is not None:
        change["NewImage"] = new
    if old is not None:
        change["OldImage"] = old
    return {"eventID": f"e{seq}", "eventName": name, "eventVersion": "1.1", "eventSource": "aws:dynamodb",
            "awsRegion": "us-east-1", "dynamodb": change, "eventSourceARN": STREAM_ARN}


def stream(*records):
    return {"Records": list(records)}


v1 = issue_image(NEW_ISSUE, 1, "Checkout fails", 3)
v2 = issue_image(NEW_ISSUE, 2, "Checkout fails on Safari", 8)
poison = {k: v for k, v in issue_image("01JDQ5S0000000000000000N07", 1, "bad").items() if k != "version"}
STREAM_EVENTS = [
    # file, purpose, event, expected failures, extra checks
    ("indexer-insert", "A new issue: one entry per column (and state scope) is written.",
     stream(record("100", "INSERT", None, v1)), [], {"writes_at_least": 1}),
    ("indexer-modify", "An issue's title and a field value change: only those entries move.",
     stream(record("200", "MODIFY", v1, v2)), [], {"writes_at_least": 1}),
    ("indexer-modify-noop", "A MODIFY whose version is already indexed (run after indexer-insert): no write.",
     stream(record("100", "MODIFY", v1, v1)), [], {"after": "indexer-insert.json", "writes": 0}),
    ("indexer-remove", "An issue is deleted: its entries go, a tombstone keeps replays out.",
     stream(record("300", "REMOVE", v2, None)), [], {"after": "indexer-modify.json", "writes_at_least": 1}),
    ("indexer-batch-one-issue", "Three records for one issue in one batch: one net change, written once.",
     stream(record("100", "INSERT", None, v1), record("200", "MODIFY", v1, v2),
            record("300", "MODIFY", v2, issue_image(NEW_ISSUE, 3, "Checkout fixed", 8, "closed"))), [], {"units": 1}),
    ("indexer-batch-poison", "A batch with an unreadable record: parked (a marker in the index table), the rest of the batch indexed, no batch item failure.",
     stream(record("100", "INSERT", None, v1), record("200", "INSERT", None, poison, "01JDQ5S0000000000000000N07"),
            record("300", "MODIFY", v1, v2)), [], {}),
]

manifest = []
for name, function, status, purpose, ev in EVENTS:
    (root / f"{name}.json").write_text(json.dumps(ev, indent=2) + "\n")
    manifest.append({"file": f"{name}.json", "function": function, "status": status, "purpose": purpose})
for name, purpose, ev, failures, checks in STREAM_EVENTS:
    (root / f"{name}.json").write_text(json.dumps(ev, indent=2) + "\n")
    manifest.append({"file": f"{name}.json", "function": "IndexerFunction", "batch_item_failures": failures,
                     "purpose": purpose, **checks})
# Events written by hand or by other tools (the authorizer's, the field job's, ...) keep their
# manifest entries, in place; the ones written here replace theirs, and new ones go last.
written = {e["file"]: e for e in manifest}
manifest_path = root / "manifest.json"
kept = json.loads(manifest_path.read_text()) if manifest_path.exists() else []
merged = [written.pop(e["file"], e) for e in kept]
merged += [e for e in manifest if e["file"] in written]
manifest_path.write_text(json.dumps(merged, indent=2) + "\n")
print(f"wrote {len(EVENTS)} events to {root}")
