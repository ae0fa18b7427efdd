// The API as the console meets it: bearer token, JSON, problem+json errors, cursors, ETags.
import { parse } from "lossless-json";
import { config } from "./config";
import { refreshSession, signedOut, token } from "./auth";

export type FieldType = "text" | "number" | "date" | "datetime" | "select";
export type Value = string | number;

export interface Field {
  id: string;
  name: string;
  type: FieldType;
  options?: string[];
  sortable: boolean;
}
export interface Project {
  id: string;
  name: string;
  created_at: string;
  fields?: Field[];
}
export interface Participant {
  kind: "user" | "team";
  id: string;
  role: string;
  display_name?: string;
}
export interface Summary {
  id: string;
  project_id: string;
  num: number;
  title: string;
  state: "open" | "closed";
  fields: Record<string, Value>;
  participants: Participant[];
  parent_id: string | null;
  version: number;
  created_at: string;
  updated_at: string;
  via?: Participant[];
}
export interface Relation {
  kind: string;
  issue: { id: string; project_id: string; num: number; title: string; state: string };
}
export interface Issue extends Summary {
  description: string;
  sub_issues: { open: number; closed: number };
  relations: Relation[];
  comment_count: number;
}
export interface Comment {
  id: string;
  author: string;
  author_display_name?: string;
  body: string;
  created_at: string;
  updated_at: string;
}
export interface Change {
  field: string;
  from?: unknown;
  to?: unknown;
  participant?: { kind: string; id: string };
  issue_id?: string;
}
export interface HistoryEntry {
  version: number;
  at: string;
  actor: string | null;
  action: "created" | "updated";
  changes: Change[];
}
export interface View {
  id: string;
  project_id: string;
  name: string;
  where: unknown[];
  sort: string;
  order: "asc" | "desc";
  state: string | null;
  group_by: string | null;
  ready: boolean;
  count: number | null;
  groups: { value: string | null; count: number }[] | null;
}
export interface Workspace {
  id: string;
  name: string;
  role?: string;
}
export interface Member {
  id: string;
  role: string;
  display_name: string | null;
}
export interface Invitation {
  id: string;
  email: string;
  role: string;
  created_at: string;
  workspace?: { id: string; name: string };
}
export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

/** A problem+json answer (RFC 9457), or a network failure as status 0. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string,
    /** Seconds, from `Retry-After` (409 while a column or view is building, 429). */
    readonly retryAfter?: number,
    readonly errors?: { field: string; message: string }[],
  ) {
    super(detail || title);
  }
  /** The index is still building what was asked for: worth retrying after `retryAfter`. */
  get building(): boolean {
    return this.status === 409 && this.retryAfter !== undefined;
  }
  /** Over the tenant's rate limit: worth retrying after `retryAfter`. */
  get throttled(): boolean {
    return this.status === 429;
  }
}

/** `Retry-After` in seconds: a number of seconds or an HTTP date; at least 1. */
function retryAfterSeconds(value: string | null): number | undefined {
  if (value === null) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(1, Math.ceil(seconds));
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(1, Math.ceil((at - Date.now()) / 1000)) : 1;
}

export interface Options {
  method?: string;
  body?: unknown;
  ifMatch?: number;
  idempotencyKey?: string;
}

export interface Answer<T> {
  body: T;
  etag?: string;
}

/**
 * One request. A `401` (the token expired) gets a fresh token once and is sent again; when
 * that fails too, the console goes back to its sign-in.
 */
export async function call<T>(path: string, options: Options = {}): Promise<Answer<T>> {
  try {
    return await callOnce<T>(path, options);
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) throw e;
    if (await sharedRefresh()) return await callOnce<T>(path, options);
    signedOut();
    throw e;
  }
}

/** One token refresh for every request that met the same expiry (a refresh token may be single-use). */
let refreshing: Promise<boolean> | undefined;
function sharedRefresh(): Promise<boolean> {
  refreshing ??= refreshSession()
    .catch(() => false)
    .finally(() => setTimeout(() => (refreshing = undefined), 5000));
  return refreshing;
}

async function callOnce<T>(path: string, options: Options): Promise<Answer<T>> {
  const headers: Record<string, string> = {};
  const bearer = token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  if (options.ifMatch !== undefined) headers["If-Match"] = `"${options.ifMatch}"`;
  if (options.idempotencyKey) headers["Idempotency-Key"] = options.idempotencyKey;
  let response: Response;
  try {
    response = await fetch(`${config().api}${path}`, {
      method: options.method ?? "GET",
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
  } catch (e) {
    throw new ApiError(0, "Network error", `The API could not be reached (${String(e)}).`);
  }
  const text = await response.text();
  const parsed = text ? safeJson(text) : undefined;
  if (!response.ok) {
    const problem = (parsed ?? {}) as Record<string, unknown>;
    throw new ApiError(
      response.status,
      String(problem.title ?? response.statusText),
      String(problem.detail ?? problem.title ?? `HTTP ${response.status}`),
      retryAfterSeconds(response.headers.get("Retry-After")),
      problem.errors as ApiError["errors"],
    );
  }
  return { body: parsed as T, etag: response.headers.get("ETag") ?? undefined };
}

/**
 * A number field holds up to 38 significant digits, which a JavaScript number cannot: a
 * number whose digits a double does not keep exactly stays the API's digits, as a string.
 */
function exactNumber(digits: string): number | string {
  const n = Number(digits);
  return String(n) === digits ? n : digits;
}

function safeJson(text: string): unknown {
  try {
    return parse(text, null, exactNumber);
  } catch {
    return { detail: text };
  }
}

export async function get<T>(path: string): Promise<T> {
  return (await call<T>(path)).body;
}

/**
 * A write. A create carries an `Idempotency-Key`, so when the network fails before the answer
 * arrives it is sent once more with the same key and cannot create twice.
 */
export async function send<T>(method: string, path: string, body?: unknown, options: Options = {}): Promise<T> {
  const idempotencyKey = method === "POST" ? crypto.randomUUID() : undefined;
  const request = { ...options, method, body, idempotencyKey };
  try {
    return (await call<T>(path, request)).body;
  } catch (e) {
    if (!(idempotencyKey && e instanceof ApiError && e.status === 0)) throw e;
    return (await call<T>(path, request)).body;
  }
}

/** `path` with query parameters, leaving out empty ones. */
export function withQuery(path: string, query: Record<string, string | number | undefined | null>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

export const enc = encodeURIComponent;
