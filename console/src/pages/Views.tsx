// Saved views: the list of a project's views, a form to save one, and a view itself — a board
// with a column per group when it is grouped by state or a select field, else a list. A view
// still building answers 409 + Retry-After: shown as "building, retrying".
import { useEffect, useState, type FormEvent } from "react";
import { enc, get, send, withQuery, type Field, type Page, type Project, type Summary, type View } from "../api";
import { Empty, ErrorBox, Link, LoadState, useAction, useLoad, usePages } from "../ui";
import { IssueList } from "./Issue";

export function ViewsPage({ projectId }: { projectId: string }) {
  const load = useLoad(async () => {
    const [project, views] = await Promise.all([
      get<Project>(`/projects/${enc(projectId)}`),
      get<Page<View>>(`/projects/${enc(projectId)}/views?limit=100`),
    ]);
    return { project, views: views.items };
  }, projectId);
  return (
    <LoadState load={load} what="the views">
      {({ project, views }) => (
        <section>
          <p className="crumbs"><Link to={`/p/${project.id}`}>{project.name}</Link> / views</p>
          <h1>Saved views</h1>
          {views.length === 0 ? <Empty>No saved views yet.</Empty> : null}
          <ul className="list" data-testid="views">
            {views.map((v) => (
              <li key={v.id}>
                <Link to={`/v/${v.id}`}>{v.name}</Link>{" "}
                <span className="muted">{v.ready ? `${v.count} issues` : "building…"}{v.group_by ? " · board" : ""}</span>
              </li>
            ))}
          </ul>
          <NewView project={project} />
        </section>
      )}
    </LoadState>
  );
}

function NewView({ project }: { project: Project }) {
  const fields = project.fields ?? [];
  const [name, setName] = useState("");
  const [where, setWhere] = useState("");
  const [sort, setSort] = useState("num");
  const [order, setOrder] = useState("asc");
  const [groupBy, setGroupBy] = useState("");
  const action = useAction();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    await action.run(async () => {
      const body: Record<string, unknown> = { name: name.trim(), sort, order };
      if (where.trim()) body.where = JSON.parse(where);
      if (groupBy) body.group_by = groupBy;
      const view = await send<View>("POST", `/projects/${enc(project.id)}/views`, body);
      window.location.hash = `#/v/${view.id}`;
    });
  };
  return (
    <form className="stack" onSubmit={submit} aria-label="New view">
      <h2>Save a view</h2>
      <label>Name <input name="view-name" value={name} onChange={(e) => setName(e.target.value)} required /></label>
      <label>Where <input name="view-where" value={where} onChange={(e) => setWhere(e.target.value)} placeholder='[["state","eq","open"]]' /></label>
      <label>
        Sort
        <select name="view-sort" value={sort} onChange={(e) => setSort(e.target.value)}>
          {["num", "title", "state", "created_at", "updated_at"].map((k) => <option key={k}>{k}</option>)}
          {fields.map((f) => <option key={f.id} value={f.id}>{f.name}</option>)}
        </select>
        <select name="view-order" value={order} onChange={(e) => setOrder(e.target.value)}>
          <option>asc</option>
          <option>desc</option>
        </select>
      </label>
      <label>
        Board by
        <select name="view-group" value={groupBy} onChange={(e) => setGroupBy(e.target.value)}>
          <option value="">(no board: a list)</option>
          <option value="state">state</option>
          {fields.filter((f) => f.type === "select").map((f) => <option key={f.id} value={f.id}>{f.name}</option>)}
        </select>
      </label>
      <button type="submit" disabled={action.busy}>Save view</button>
      <ErrorBox error={action.error} />
    </form>
  );
}

export function ViewPage({ viewId }: { viewId: string }) {
  // A view not ready yet has null counts: ask again until it is.
  const load = useLoad(async () => {
    const view = await get<View>(`/views/${enc(viewId)}`);
    const project = await get<Project>(`/projects/${enc(view.project_id)}`);
    return { view, project };
  }, viewId);
  const { data, reload } = load;
  useEffect(() => {
    if (!data || data.view.ready) return;
    const timer = setTimeout(reload, 1000);
    return () => clearTimeout(timer);
  }, [data, reload]);
  return (
    <LoadState load={load} what="the view">
      {({ view, project }) => <ViewBody view={view} project={project} reload={load.reload} />}
    </LoadState>
  );
}

function ViewBody({ view, project, reload }: { view: View; project: Project; reload: () => void }) {
  const fields = project.fields ?? [];
  const groupField: Field | undefined = fields.find((f) => f.id === view.group_by);
  const action = useAction();
  const remove = () =>
    action.run(async () => {
      await send("DELETE", `/views/${enc(view.id)}`);
      window.location.hash = `#/p/${project.id}/views`;
    });
  return (
    <section>
      <p className="crumbs">
        <Link to={`/p/${project.id}`}>{project.name}</Link> / <Link to={`/p/${project.id}/views`}>views</Link>
      </p>
      <div className="title-row">
        <h1 data-testid="view-name">{view.name}</h1>
        <span className="muted" data-testid="view-count">{view.ready ? `${view.count} issues` : "building, retrying…"}</span>
        <button className="link" onClick={reload}>Refresh</button>
        <button className="link danger" onClick={() => void remove()}>Delete view</button>
      </div>
      <ErrorBox error={action.error} />
      {view.group_by ? (
        <div className="board" data-testid="board">
          {(view.groups ?? defaultGroups(view, groupField)).map((g) => (
            <BoardColumn key={g.value ?? ""} view={view} value={g.value} count={view.ready ? g.count : undefined} />
          ))}
        </div>
      ) : (
        <ViewList view={view} group={undefined} />
      )}
    </section>
  );
}

function defaultGroups(view: View, field: Field | undefined): { value: string | null; count: number }[] {
  const values = view.group_by === "state" ? ["closed", "open"] : (field?.options ?? []);
  return [...values.map((value) => ({ value, count: 0 })), { value: null, count: 0 }];
}

function BoardColumn({ view, value, count }: { view: View; value: string | null; count?: number }) {
  return (
    <div className="board-col" data-group={value ?? ""}>
      <h3>
        {value ?? "(none)"} <span className="muted">{count ?? ""}</span>
      </h3>
      <ViewList view={view} group={value ?? ""} />
    </div>
  );
}

function ViewList({ view, group }: { view: View; group: string | undefined }) {
  const path = withQuery(`/views/${enc(view.id)}/issues`, { limit: 50 }) + (group === undefined ? "" : `&group=${enc(group)}`);
  const pages = usePages<Summary>(path, (u) => get<Page<Summary>>(u));
  // IssueList says "building, retrying" while the view answers 409 + Retry-After.
  return <IssueList pages={pages} empty="No issues." />;
}
