// Small pieces every page shares: loading, empty and error states, and loads that wait out
// a `409` + `Retry-After` ("building, retrying") by themselves.
import { useCallback, useEffect, useRef, useState, type ReactNode } from "react";
import { ApiError, type Page } from "./api";

export function Loading({ what }: { what?: string }) {
  return <p className="muted" role="status">Loading{what ? ` ${what}` : ""}…</p>;
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="empty">{children}</p>;
}

/** An error as the API explained it: problem+json `detail`, with field errors listed. */
export function ErrorBox({ error }: { error: unknown }) {
  if (!error) return null;
  if (error instanceof ApiError) {
    return (
      <div className="error" role="alert" data-status={error.status}>
        <strong>{error.title}</strong> {error.detail}
        {error.errors?.length ? (
          <ul>{error.errors.map((e) => <li key={e.field + e.message}>{e.field}: {e.message}</li>)}</ul>
        ) : null}
      </div>
    );
  }
  return <div className="error" role="alert">{String((error as Error)?.message ?? error)}</div>;
}

/** A 409 + Retry-After (the index is building what was asked for) or a 429, waited out. */
export function Building({ seconds, throttled }: { seconds: number; throttled?: boolean }) {
  return (
    <p className="building" role="status">
      {throttled ? "Over the rate limit" : "Building the index for this list"}, retrying in {seconds} s…
    </p>
  );
}

/** Worth asking again after its Retry-After: a list still building, or a 429. */
function waitFor(error: unknown): { seconds: number; throttled: boolean } | undefined {
  if (!(error instanceof ApiError) || !(error.building || error.throttled)) return undefined;
  return { seconds: error.retryAfter ?? 1, throttled: error.throttled };
}

export interface Load<T> {
  data?: T;
  error?: unknown;
  loading: boolean;
  /** Seconds until the next try while the API answers 409 (or 429) + Retry-After. */
  building?: number;
  throttled?: boolean;
  reload: () => void;
  set: (data: T) => void;
}

/** Runs `fn` when `key` changes; a building answer is retried after its Retry-After. */
export function useLoad<T>(fn: () => Promise<T>, key: string): Load<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean; building?: number; throttled?: boolean }>({ loading: true });
  const [tick, setTick] = useState(0);
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const attempt = () => {
      setState((s) => ({ ...s, loading: true }));
      fnRef.current().then(
        (data) => live && setState({ data, loading: false }),
        (error) => {
          if (!live) return;
          const wait = waitFor(error);
          if (wait) {
            setState((s) => ({ data: s.data, loading: true, building: wait.seconds, throttled: wait.throttled }));
            timer = setTimeout(attempt, wait.seconds * 1000);
          } else {
            // What was shown stays, with the error above it.
            setState((s) => ({ data: s.data, error, loading: false }));
          }
        },
      );
    };
    attempt();
    return () => {
      live = false;
      if (timer) clearTimeout(timer);
    };
  }, [key, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const set = useCallback((data: T) => setState({ data, loading: false }), []);
  return { ...state, reload, set };
}

export function LoadState<T>({ load, what, children }: { load: Load<T>; what?: string; children: (data: T) => ReactNode }) {
  if (load.data === undefined) {
    if (load.building) return <Building seconds={load.building} throttled={load.throttled} />;
    if (load.error) return <ErrorBox error={load.error} />;
    return <Loading what={what} />;
  }
  return (
    <>
      {load.building ? <Building seconds={load.building} throttled={load.throttled} /> : null}
      <ErrorBox error={load.error} />
      {children(load.data)}
    </>
  );
}

/** Runs a write, keeping its error to show beside the form that made it. */
export function useAction() {
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const run = useCallback(async (fn: () => Promise<unknown>) => {
    setBusy(true);
    setError(undefined);
    try {
      await fn();
      return true;
    } catch (e) {
      setError(e);
      return false;
    } finally {
      setBusy(false);
    }
  }, []);
  return { error, busy, run, clear: () => setError(undefined) };
}

export function Link({ to, children, className }: { to: string; children: ReactNode; className?: string }) {
  return <a href={`#${to}`} className={className}>{children}</a>;
}

/** The console's own record of a write it made, so lists fed by the index re-read once it caught up. */
let lastWrite = 0;
export function noteWrite() {
  lastWrite = Date.now();
}
export function sinceWrite(): number {
  return Date.now() - lastWrite;
}

interface PagesState<T> {
  items: T[];
  next: string | null;
  loading: boolean;
  error?: unknown;
  building?: number;
  throttled?: boolean;
}

export interface Pages<T> extends PagesState<T> {
  /** The next page; does nothing while one is loading or after an error (see `retry`). */
  more: () => void;
  /** Asks again for the page that failed. */
  retry: () => void;
  /** From the first page again, the list emptied meanwhile. */
  reload: () => void;
  /** The first page again, replacing the list when it arrives (nothing flickers). */
  refresh: () => void;
}

/**
 * A cursor list: the first page of `path`, then `more()` follows `next_cursor`. A page may be
 * empty with a cursor (a rare filter): following it to null still lists every match once.
 * A 409 or 429 with Retry-After is asked again after it; any other error stops the list until
 * `retry()`, so a failing page is never asked for in a loop.
 */
export function usePages<T>(path: string | undefined, fetchPage: (path: string) => Promise<Page<T>>): Pages<T> {
  const [state, setState] = useState<PagesState<T>>({ items: [], next: null, loading: true });
  const [tick, setTick] = useState(0);
  const busy = useRef(false);
  const generation = useRef(0);
  const failed = useRef<{ cursor: string | null; replace: boolean } | undefined>(undefined);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const fetchRef = useRef(fetchPage);
  fetchRef.current = fetchPage;

  const step = useCallback(
    (cursor: string | null, replace: boolean, clear = false) => {
      if (!path) return;
      const mine = generation.current;
      busy.current = true;
      failed.current = undefined;
      setState((s) => ({ ...s, items: clear ? [] : s.items, next: clear ? null : s.next, loading: true, error: undefined }));
      const sep = path.includes("?") ? "&" : "?";
      const url = cursor ? `${path}${sep}cursor=${encodeURIComponent(cursor)}` : path;
      fetchRef.current(url).then(
        (page) => {
          if (mine !== generation.current) return;
          busy.current = false;
          setState((s) => ({ items: replace ? page.items : [...s.items, ...page.items], next: page.next_cursor, loading: false }));
        },
        (error) => {
          if (mine !== generation.current) return;
          const wait = waitFor(error);
          if (wait) {
            setState((s) => ({ ...s, building: wait.seconds, throttled: wait.throttled }));
            timer.current = setTimeout(() => mine === generation.current && step(cursor, replace), wait.seconds * 1000);
            return;
          }
          busy.current = false;
          failed.current = { cursor, replace };
          setState((s) => ({ ...s, loading: false, error, building: undefined, throttled: undefined }));
        },
      );
    },
    [path],
  );

  useEffect(() => {
    generation.current += 1;
    step(null, true, true);
  }, [step, tick]);
  // Gone from the page: nothing in flight or waiting may act (or ask again) any more.
  useEffect(
    () => () => {
      generation.current += 1;
      clearTimeout(timer.current);
    },
    [],
  );

  const { next, error } = state;
  const more = useCallback(() => {
    if (!busy.current && next && !error) step(next, false);
  }, [next, error, step]);
  const retry = useCallback(() => {
    const f = failed.current;
    if (f && !busy.current) step(f.cursor, f.replace);
  }, [step]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  const refresh = useCallback(() => {
    if (busy.current) return;
    generation.current += 1;
    step(null, true);
  }, [step]);
  return { ...state, more, retry, reload, refresh };
}

/** A list's wait (building, rate limit) or error, with a way to ask again. */
export function PagesError({ pages }: { pages: Pages<unknown> }) {
  if (pages.building) return <Building seconds={pages.building} throttled={pages.throttled} />;
  if (!pages.error) return null;
  return (
    <div>
      <ErrorBox error={pages.error} />
      <button className="link" onClick={pages.retry}>Try again</button>
    </div>
  );
}

/** `fn` after each of `delays` (ms); the timers end with the component. */
export function useLater() {
  const timers = useRef<ReturnType<typeof setTimeout>[]>([]);
  useEffect(() => () => timers.current.forEach(clearTimeout), []);
  return useCallback((fn: () => void, delays: number[]) => {
    for (const ms of delays) timers.current.push(setTimeout(fn, ms));
  }, []);
}
