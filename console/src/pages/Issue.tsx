// An issue: fields edited in place with If-Match (a 412 says someone else changed it first),
// participants, sub-issues, relations, comments and history.
import { useEffect, useRef, useState, type FormEvent, type ReactNode } from "react";
import { ApiError, call, enc, get, send, withQuery, type Comment, type Field, type HistoryEntry, type Issue, type Page, type Project, type Summary } from "../api";
import { Empty, ErrorBox, Link, LoadState, noteWrite, PagesError, useAction, useLater, useLoad, usePages, type Pages } from "../ui";
import { fromInput, inputType, show, toInput } from "../values";

const RELATION_KINDS = ["blocks", "blocked_by", "duplicates", "duplicated_by", "relates_to"];
const ROLES = ["assignee", "reporter", "watcher"];

export function IssuePage({ issueId }: { issueId: string }) {
  const load = useLoad(async () => {
    const issue = await get<Issue>(`/issues/${enc(issueId)}`);
    const project = await get<Project>(`/projects/${enc(issue.project_id)}`);
    return { issue, project };
  }, issueId);
  return (
    <LoadState load={load} what="the issue">
      {({ issue, project }) => (
        <IssueView
          issue={issue}
          project={project}
          onChanged={(next) => {
            noteWrite();
            load.set({ issue: next, project });
          }}
          reload={load.reload}
        />
      )}
    </LoadState>
  );
}

function IssueView({ issue, project, onChanged, reload }: { issue: Issue; project: Project; onChanged: (i: Issue) => void; reload: () => void }) {
  const fields = project.fields ?? [];
  const [conflict, setConflict] = useState<string>();
  const action = useAction();
  // Edits go one at a time, each guarded by the version the one before it left, so two quick
  // edits of one's own never collide.
  const latest = useRef(issue);
  // A reload that left before an edit may land after it: never step back to an older version.
  if (issue.version >= latest.current.version) latest.current = issue;
  const queue = useRef<Promise<unknown>>(Promise.resolve());

  /**
   * A merge patch guarded by the version shown: a stale one is 412 and changes nothing.
   * Resolves to whether the edit is over (saved, or refused as stale with the latest shown).
   */
  const patch = (body: Record<string, unknown>): Promise<boolean> => {
    setConflict(undefined);
    const run = async () => {
      let over = false;
      await action.run(async () => {
        const shown = latest.current;
        try {
          const answer = await call<Issue>(`/issues/${enc(shown.id)}`, { method: "PATCH", body, ifMatch: shown.version });
          // A write answers the issue without what only GET carries (sub-issue counts, relations).
          latest.current = { ...shown, ...answer.body };
          onChanged(latest.current);
          over = true;
        } catch (e) {
          if (!(e instanceof ApiError && e.status === 412)) throw e;
          setConflict("Someone changed this issue after you opened it, so your edit was not saved. The latest version is shown now: make your change again.");
          reload();
          // The editor closes on the latest version; only another error keeps the draft open.
          over = true;
        }
      });
      return over;
    };
    const done = queue.current.then(run);
    queue.current = done;
    return done;
  };

  return (
    <article className="issue" data-testid="issue" data-version={issue.version}>
      <p className="crumbs">
        <Link to={`/p/${project.id}`}>{project.name}</Link> / #{issue.num}
        {issue.parent_id ? <> · child of <Link to={`/i/${issue.parent_id}`}>its parent</Link></> : null}
      </p>
      <h1>
        <Editable label="Title" value={issue.title} onSave={(v) => patch({ title: v })} />
      </h1>
      {conflict ? <div className="error" role="alert" data-status="412">{conflict}</div> : null}
      <ErrorBox error={action.error} />
      <div className="columns">
        <div className="main-col">
          <dl className="fields">
            <dt>State</dt>
            <dd>
              <select aria-label="State" value={issue.state} onChange={(e) => void patch({ state: e.target.value })}>
                <option value="open">open</option>
                <option value="closed">closed</option>
              </select>
            </dd>
            {fields.map((f) => (
              <FieldRow key={f.id} field={f} value={issue.fields[f.id]} onSave={(v) => patch({ fields: { [f.id]: v } })} />
            ))}
          </dl>
          <h2>Description</h2>
          <Editable label="Description" value={issue.description ?? ""} multiline onSave={(v) => patch({ description: v })} />
          <Comments issue={issue} />
        </div>
        <aside>
          <Participants issue={issue} onChanged={onChanged} />
          <Children issue={issue} />
          <Relations issue={issue} onChanged={reload} />
          <History issue={issue} fields={fields} />
        </aside>
      </div>
    </article>
  );
}

function Editable({ label, value, multiline, onSave }: { label: string; value: string; multiline?: boolean; onSave: (v: string) => Promise<boolean> }) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(value);
  if (!editing) {
    return (
      <span className="editable" role="button" tabIndex={0} aria-label={`Edit ${label}`} onClick={() => { setDraft(value); setEditing(true); }}>
        {value || <span className="muted">(none)</span>}
      </span>
    );
  }
  const save = async (e: FormEvent) => {
    e.preventDefault();
    // A failed save keeps the draft open (its error shows above).
    if (await onSave(draft)) setEditing(false);
  };
  return (
    <form className="inline" onSubmit={save}>
      {multiline ? (
        <textarea aria-label={label} value={draft} onChange={(e) => setDraft(e.target.value)} rows={6} autoFocus />
      ) : (
        <input aria-label={label} value={draft} onChange={(e) => setDraft(e.target.value)} autoFocus />
      )}
      <button type="submit">Save</button>
      <button type="button" className="link" onClick={() => setEditing(false)}>Cancel</button>
    </form>
  );
}

function FieldRow({ field, value, onSave }: { field: Field; value: string | number | undefined; onSave: (v: string | null) => Promise<boolean> }) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState("");
  const start = () => {
    setDraft(toInput(field, value));
    setEditing(true);
  };
  const save = async (e: FormEvent) => {
    e.preventDefault();
    if (await onSave(fromInput(field, draft) as string | null)) setEditing(false);
  };
  return (
    <>
      <dt>{field.name}</dt>
      <dd data-field={field.name}>
        {editing ? (
          <form className="inline" onSubmit={save}>
            {field.type === "select" ? (
              <select aria-label={field.name} value={draft} onChange={(e) => setDraft(e.target.value)} autoFocus>
                <option value="">(none)</option>
                {field.options?.map((o) => <option key={o} value={o}>{o}</option>)}
              </select>
            ) : (
              <input aria-label={field.name} type={inputType(field)} value={draft} onChange={(e) => setDraft(e.target.value)} autoFocus />
            )}
            <button type="submit">Save</button>
            <button type="button" className="link" onClick={() => setEditing(false)}>Cancel</button>
          </form>
        ) : (
          <span className="editable" role="button" tabIndex={0} aria-label={`Edit ${field.name}`} onClick={start}>
            {value === undefined ? <span className="muted">(none)</span> : show(field, value)}
          </span>
        )}
      </dd>
    </>
  );
}

function Panel({ title, children }: { title: string; children: ReactNode }) {
  return (
    <section className="panel">
      <h2>{title}</h2>
      {children}
    </section>
  );
}

function Participants({ issue, onChanged }: { issue: Issue; onChanged: (i: Issue) => void }) {
  const [kind, setKind] = useState("user");
  const [id, setId] = useState("");
  const [role, setRole] = useState("assignee");
  const action = useAction();
  const put = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await action.run(async () => onChanged({ ...issue, ...(await send<Issue>("PUT", `/issues/${enc(issue.id)}/participants/${kind}/${enc(id.trim())}`, { role })) }));
    if (ok) setId("");
  };
  const remove = (k: string, pid: string) =>
    action.run(async () => {
      await send("DELETE", `/issues/${enc(issue.id)}/participants/${k}/${enc(pid)}`);
      onChanged(await get<Issue>(`/issues/${enc(issue.id)}`));
    });
  return (
    <Panel title="Participants">
      <ul className="list" data-testid="participants">
        {issue.participants.map((p) => (
          <li key={p.kind + p.id}>
            {p.kind === "team" ? "team " : ""}
            {p.display_name ?? p.id} <span className="muted">{p.role}</span>{" "}
            <button className="link" onClick={() => void remove(p.kind, p.id)} aria-label={`Remove ${p.id}`}>×</button>
          </li>
        ))}
      </ul>
      <form className="inline" onSubmit={put}>
        <select aria-label="Participant kind" value={kind} onChange={(e) => setKind(e.target.value)}>
          <option value="user">user</option>
          <option value="team">team</option>
        </select>
        <input aria-label="Participant id" placeholder="id" value={id} onChange={(e) => setId(e.target.value)} required size={10} />
        <select aria-label="Role" value={role} onChange={(e) => setRole(e.target.value)}>
          {ROLES.map((r) => <option key={r}>{r}</option>)}
        </select>
        <button type="submit">Add</button>
      </form>
      <ErrorBox error={action.error} />
    </Panel>
  );
}

function Children({ issue }: { issue: Issue }) {
  const pages = usePages<Summary>(`/issues/${enc(issue.id)}/children?limit=50`, (u) => get<Page<Summary>>(u));
  const later = useLater();
  const [title, setTitle] = useState("");
  const action = useAction();
  const add = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await action.run(() => send("POST", `/projects/${enc(issue.project_id)}/issues`, { title: title.trim(), parent_id: issue.id }));
    if (ok) {
      setTitle("");
      noteWrite();
      // Children are listed from the index: within about a second.
      later(() => pages.items.length <= 50 && pages.refresh(), [1000, 2500]);
    }
  };
  return (
    <Panel title={`Sub-issues (${issue.sub_issues.open} open, ${issue.sub_issues.closed} closed)`}>
      <IssueList pages={pages} empty="No sub-issues." />
      <form className="inline" onSubmit={add}>
        <input aria-label="Sub-issue title" placeholder="New sub-issue" value={title} onChange={(e) => setTitle(e.target.value)} required />
        <button type="submit">Add</button>
      </form>
      <ErrorBox error={action.error} />
    </Panel>
  );
}

export function IssueList({ pages, empty }: { pages: Pages<Summary>; empty: string }) {
  return (
    <>
      <PagesError pages={pages} />
      {!pages.loading && !pages.error && pages.items.length === 0 && !pages.next ? <Empty>{empty}</Empty> : null}
      <ul className="list">
        {pages.items.map((s) => (
          <li key={s.id}>
            <Link to={`/i/${s.id}`}>#{s.num} {s.title}</Link> <span className={`state ${s.state}`}>{s.state}</span>
          </li>
        ))}
      </ul>
      {pages.next ? <button className="link" onClick={pages.more}>More</button> : null}
    </>
  );
}

function Relations({ issue, onChanged }: { issue: Issue; onChanged: () => void }) {
  const [kind, setKind] = useState("relates_to");
  const [other, setOther] = useState("");
  const action = useAction();
  const put = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await action.run(() => send("PUT", `/issues/${enc(issue.id)}/relations/${kind}/${enc(other.trim())}`));
    if (ok) {
      setOther("");
      onChanged();
    }
  };
  const remove = (k: string, id: string) =>
    action.run(async () => {
      await send("DELETE", `/issues/${enc(issue.id)}/relations/${k}/${enc(id)}`);
      onChanged();
    });
  return (
    <Panel title="Relations">
      {issue.relations.length === 0 ? <Empty>No relations.</Empty> : null}
      <ul className="list">
        {issue.relations.map((r) => (
          <li key={r.kind + r.issue.id}>
            <span className="muted">{r.kind.replace("_", " ")}</span> <Link to={`/i/${r.issue.id}`}>#{r.issue.num} {r.issue.title}</Link>{" "}
            <button className="link" onClick={() => void remove(r.kind, r.issue.id)} aria-label={`Remove relation to ${r.issue.num}`}>×</button>
          </li>
        ))}
      </ul>
      <form className="inline" onSubmit={put}>
        <select aria-label="Relation kind" value={kind} onChange={(e) => setKind(e.target.value)}>
          {RELATION_KINDS.map((k) => <option key={k}>{k}</option>)}
        </select>
        <input aria-label="Other issue id" placeholder="issue id" value={other} onChange={(e) => setOther(e.target.value)} required size={12} />
        <button type="submit">Relate</button>
      </form>
      <ErrorBox error={action.error} />
    </Panel>
  );
}

function Comments({ issue }: { issue: Issue }) {
  // Newest first, so a new comment is on the first page whatever the count.
  const pages = usePages<Comment>(`/issues/${enc(issue.id)}/comments?order=desc&limit=50`, (u) => get<Page<Comment>>(u));
  const [body, setBody] = useState("");
  const action = useAction();
  const post = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await action.run(() => send("POST", `/issues/${enc(issue.id)}/comments`, { body }));
    if (ok) {
      setBody("");
      pages.reload();
    }
  };
  return (
    <section className="comments">
      <h2>Comments</h2>
      <PagesError pages={pages} />
      {!pages.loading && pages.items.length === 0 ? <Empty>No comments yet.</Empty> : null}
      <ol className="list" data-testid="comments">
        {pages.items.map((c) => (
          <li key={c.id}>
            <strong>{c.author_display_name ?? c.author}</strong> <span className="muted">{c.created_at.slice(0, 16).replace("T", " ")}</span>
            <p>{c.body}</p>
          </li>
        ))}
      </ol>
      {pages.next ? <button className="link" onClick={pages.more}>Older…</button> : null}
      <form onSubmit={post}>
        <textarea aria-label="Comment" value={body} onChange={(e) => setBody(e.target.value)} rows={3} required />
        <button type="submit" disabled={action.busy}>Comment</button>
      </form>
      <ErrorBox error={action.error} />
    </section>
  );
}

function History({ issue, fields }: { issue: Issue; fields: Field[] }) {
  const pages = usePages<HistoryEntry>(withQuery(`/issues/${enc(issue.id)}/history`, { limit: 20 }), (u) => get<Page<HistoryEntry>>(u));
  // History is made from the change stream: while it lacks the version shown, read its first
  // page again (in place), backing off, for about half a minute at most.
  const { refresh } = pages;
  const behind = !pages.loading && !pages.error && (pages.items[0]?.version ?? 0) < issue.version;
  const tries = useRef({ version: issue.version, count: 0 });
  useEffect(() => {
    // A new version shown starts the count again.
    if (tries.current.version !== issue.version) tries.current = { version: issue.version, count: 0 };
    if (!behind || tries.current.count >= 8) return;
    const timer = setTimeout(refresh, 500 * 2 ** Math.min(tries.current.count++, 4));
    return () => clearTimeout(timer);
  }, [behind, refresh, pages.items, issue.version]);
  const name = (id: string) => fields.find((f) => f.id === id)?.name ?? id;
  // A related issue by its number while it is still related; by its id after.
  const other = (id?: string) => {
    const related = issue.relations.find((r) => r.issue.id === id)?.issue;
    return related ? `#${related.num}` : (id ?? "?");
  };
  return (
    <Panel title="History">
      <PagesError pages={pages} />
      {behind ? (
        <p className="muted">
          Catching up… <button className="link" onClick={refresh}>Refresh</button>
        </p>
      ) : null}
      <ol className="list history" data-testid="history">
        {pages.items.map((h) => (
          <li key={h.version}>
            <span className="muted">v{h.version} · {h.at.slice(0, 19).replace("T", " ")} · {h.actor ?? "system"}</span>{" "}
            {h.action === "created"
              ? "created"
              : h.changes.map((c, i) => (
                  <span key={i} className="change">
                    {c.field === "participant"
                      ? `${c.participant?.id}: ${String(c.from ?? "–")} → ${String(c.to ?? "–")}`
                      : c.field === "relation"
                        ? `relation with ${other(c.issue_id)}: ${String(c.from ?? "–")} → ${String(c.to ?? "–")}`
                        : c.field === "description"
                          ? "description"
                          : `${name(c.field)}: ${String(c.from ?? "–")} → ${String(c.to ?? "–")}`}
                  </span>
                ))}
          </li>
        ))}
      </ol>
      {pages.next ? <button className="link" onClick={pages.more}>Older…</button> : null}
    </Panel>
  );
}
