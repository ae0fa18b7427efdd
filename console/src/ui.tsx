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

export function Building({ seconds }: { seconds: number }) {
  return (
    <p className="building" role="status">
      Building the index for this list, retrying in {seconds} s…
    </p>
  );
}

export interface Load<T> {
  data?: T;
  error?: unknown;
  loading: boolean;
  /** Seconds until the next try while the API answers 409 + Retry-After. */
  building?: number;
  reload: () => void;
  set: (data: T) => void;
}

/** Runs `fn` when `key` changes; a building answer is retried after its Retry-After. */
export function useLoad<T>(fn: () => Promise<T>, key: string): Load<T> {
  const [state, setState] = useState<{ data?: T; error?: unknown; loading: boolean; building?: number }>({ loading: true });
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
          if (error instanceof ApiError && error.building) {
            const wait = Math.max(1, error.retryAfter ?? 1);
            setState({ loading: true, building: wait });
            timer = setTimeout(attempt, wait * 1000);
          } else {
            setState({ error, loading: false });
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
  if (load.building) return <Building seconds={load.building} />;
  if (load.error) return <ErrorBox error={load.error} />;
  if (load.data === undefined) return <Loading what={what} />;
  return <>{children(load.data)}</>;
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

export interface Pages<T> {
  items: T[];
  next: string | null;
  loading: boolean;
  error?: unknown;
  building?: number;
  more: () => void;
  reload: () => void;
}

/**
 * A cursor list: the first page of `path`, then `more()` follows `next_cursor`. A page may be
 * empty with a cursor (a rare filter): following it to null still lists every match once.
 */
export function usePages<T>(path: string | undefined, fetchPage: (path: string) => Promise<Page<T>>): Pages<T> {
  const [state, setState] = useState<{ items: T[]; next: string | null; loading: boolean; error?: unknown; building?: number }>({
    items: [],
    next: null,
    loading: true,
  });
  const [tick, setTick] = useState(0);
  const busy = useRef(false);
  const generation = useRef(0);
  const fetchRef = useRef(fetchPage);
  fetchRef.current = fetchPage;

  const step = useCallback(
    (cursor: string | null, replace: boolean) => {
      if (!path) return;
      const mine = generation.current;
      busy.current = true;
      setState((s) => ({ ...s, loading: true, error: undefined }));
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
          if (error instanceof ApiError && error.building) {
            const wait = Math.max(1, error.retryAfter ?? 1);
            setState((s) => ({ ...s, building: wait }));
            setTimeout(() => mine === generation.current && step(cursor, replace), wait * 1000);
            return;
          }
          busy.current = false;
          setState((s) => ({ ...s, loading: false, error }));
        },
      );
    },
    [path],
  );

  useEffect(() => {
    generation.current += 1;
    setState({ items: [], next: null, loading: true });
    step(null, true);
  }, [step, tick]);

  const next = state.next;
  const more = useCallback(() => {
    if (!busy.current && next) step(next, false);
  }, [next, step]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, more, reload };
}
