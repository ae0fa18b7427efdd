// The grid: a column per field, a click on a header sorts by it (asc, then desc), pages follow
// the cursor as the list scrolls (only the visible rows are in the DOM), and the sort column's
// range and prefix, the state and `where` filter the list — all done by the API's index.
import { useEffect, useMemo, useRef, useState, type FormEvent } from "react";
import { createColumnHelper, flexRender, getCoreRowModel, useReactTable } from "@tanstack/react-table";
import { useVirtualizer } from "@tanstack/react-virtual";
import { enc, get, send, withQuery, type Field, type FieldType, type Page, type Project, type Summary } from "../api";
import { Empty, ErrorBox, Link, LoadState, noteWrite, PagesError, sinceWrite, useAction, useLater, useLoad, usePages, type Pages } from "../ui";
import { show } from "../values";

const BUILTIN: { key: string; name: string }[] = [
  { key: "num", name: "#" },
  { key: "title", name: "Title" },
  { key: "state", name: "State" },
];
const ROW_HEIGHT = 34;
const PAGE = 50;

interface Query {
  sort: string;
  order: "asc" | "desc";
  state: string;
  gte: string;
  lte: string;
  prefix: string;
  where: string;
}

function readQuery(): Query {
  const params = new URLSearchParams(window.location.hash.split("?")[1] ?? "");
  return {
    sort: params.get("sort") || "num",
    order: params.get("order") === "desc" ? "desc" : "asc",
    state: params.get("state") ?? "",
    gte: params.get("gte") ?? "",
    lte: params.get("lte") ?? "",
    prefix: params.get("prefix") ?? "",
    where: params.get("where") ?? "",
  };
}

/** The grid's query lives in the hash, so going back from an issue keeps it. */
function writeQuery(projectId: string, q: Query) {
  window.location.hash = withQuery(`#/p/${enc(projectId)}`, { ...q, sort: q.sort === "num" ? "" : q.sort, order: q.order === "asc" ? "" : q.order });
}

export function Grid({ projectId }: { projectId: string }) {
  const project = useLoad(() => get<Project>(`/projects/${enc(projectId)}`), projectId);
  return (
    <LoadState load={project} what="the project">
      {(p) => <ProjectGrid project={p} reloadProject={project.reload} />}
    </LoadState>
  );
}

function ProjectGrid({ project, reloadProject }: { project: Project; reloadProject: () => void }) {
  const fields = project.fields ?? [];
  const [query, setQuery] = useState(readQuery);
  useEffect(() => {
    const on = () => setQuery(readQuery());
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);

  const path = withQuery(`/projects/${enc(project.id)}/issues`, {
    sort: query.sort,
    order: query.order,
    state: query.state,
    gte: query.gte,
    lte: query.lte,
    prefix: query.prefix,
    where: query.where,
    limit: PAGE,
  });
  const pages = usePages<Summary>(path, (url) => get<Page<Summary>>(url));

  // A write this console just made reaches the index within about a second: read the first
  // page again a few times meanwhile (replacing it in place, so nothing flickers), unless the
  // reader has gone further down the list.
  const { refresh } = pages;
  const later = useLater();
  const firstPageOnly = useRef(true);
  firstPageOnly.current = pages.items.length <= PAGE;
  useEffect(() => {
    if (sinceWrite() > 5000) return;
    const timers = [1000, 2500, 5000].map((ms) => setTimeout(() => firstPageOnly.current && refresh(), ms));
    return () => timers.forEach(clearTimeout);
  }, [refresh]);

  const sortBy = (key: string) => {
    const order = query.sort === key && query.order === "asc" ? "desc" : "asc";
    writeQuery(project.id, { ...query, sort: key, order, gte: "", lte: "", prefix: "" });
  };

  return (
    <section className="grid-page">
      <div className="title-row">
        <h1 data-testid="project-name">{project.name}</h1>
        <Link to={`/p/${project.id}/views`}>Saved views</Link>
        <button className="link" onClick={pages.reload}>Refresh</button>
      </div>
      <Controls query={query} fields={fields} onApply={(q) => writeQuery(project.id, q)} />
      <PagesError pages={pages} />
      <Table fields={fields} query={query} pages={pages} onSort={sortBy} />
      <div className="forms">
        <NewIssue projectId={project.id} onCreated={() => later(() => firstPageOnly.current && refresh(), [1000, 2500])} />
        <NewField projectId={project.id} onCreated={reloadProject} />
      </div>
    </section>
  );
}

function Controls({ query, fields, onApply }: { query: Query; fields: Field[]; onApply: (q: Query) => void }) {
  const [draft, setDraft] = useState(query);
  useEffect(() => setDraft(query), [query]);
  const sortName = BUILTIN.find((b) => b.key === query.sort)?.name ?? fields.find((f) => f.id === query.sort)?.name ?? query.sort;
  const submit = (e: FormEvent) => {
    e.preventDefault();
    onApply(draft);
  };
  return (
    <form className="controls" onSubmit={submit} aria-label="Filters">
      <span className="muted">
        Sorted by <strong data-testid="sorted-by">{sortName}</strong> {query.order === "asc" ? "ascending" : "descending"}
      </span>
      <label>
        State
        <select name="state" value={draft.state} onChange={(e) => setDraft({ ...draft, state: e.target.value })}>
          <option value="">any</option>
          <option value="open">open</option>
          <option value="closed">closed</option>
        </select>
      </label>
      <label title="Inclusive bounds on the sort column, in its own type">
        ≥ <input name="gte" value={draft.gte} onChange={(e) => setDraft({ ...draft, gte: e.target.value })} size={10} />
      </label>
      <label>
        ≤ <input name="lte" value={draft.lte} onChange={(e) => setDraft({ ...draft, lte: e.target.value })} size={10} />
      </label>
      <label title="Text columns: values that start with it, case-insensitively">
        Prefix <input name="prefix" value={draft.prefix} onChange={(e) => setDraft({ ...draft, prefix: e.target.value })} size={10} />
      </label>
      <label className="where" title='A JSON array of conditions, e.g. [["state","eq","open"]]'>
        Where <input name="where" value={draft.where} onChange={(e) => setDraft({ ...draft, where: e.target.value })} placeholder='[["<field id>","gte",3]]' />
      </label>
      <button type="submit">Apply</button>
    </form>
  );
}

const column = createColumnHelper<Summary>();

function Table({ fields, query, pages, onSort }: { fields: Field[]; query: Query; pages: Pages<Summary>; onSort: (key: string) => void }) {
  const columns = useMemo(
    () => [
      column.accessor("num", { id: "num", header: "#", size: 60 }),
      column.accessor("title", { id: "title", header: "Title", size: 320 }),
      column.accessor("state", { id: "state", header: "State", size: 80 }),
      ...fields.map((f) =>
        column.accessor((row) => show(f, row.fields[f.id]), {
          id: f.id,
          header: f.name,
          size: widthOf(f.type),
          meta: { field: f },
        }),
      ),
      column.accessor((row) => row.participants.filter((p) => p.role === "assignee").map((p) => p.display_name ?? p.id).join(", "), {
        id: "assignees",
        header: "Assignees",
        size: 140,
        enableSorting: false,
      }),
      column.accessor("updated_at", { id: "updated_at", header: "Updated", size: 190, cell: (c) => c.getValue().replace("T", " ").slice(0, 19) }),
    ],
    [fields],
  );
  const table = useReactTable({ data: pages.items, columns, getCoreRowModel: getCoreRowModel(), manualSorting: true });
  const rows = table.getRowModel().rows;
  const scroller = useRef<HTMLDivElement>(null);
  const virtual = useVirtualizer({
    count: rows.length + (pages.next ? 1 : 0),
    getScrollElement: () => scroller.current,
    estimateSize: () => ROW_HEIGHT,
    overscan: 10,
  });
  const items = virtual.getVirtualItems();
  const last = items[items.length - 1];
  // The loader row is in view: read the next page.
  const { more, next, loading, error } = pages;
  useEffect(() => {
    if (last && last.index >= rows.length - 1 && next && !loading && !error) more();
  }, [last, rows.length, next, loading, error, more]);

  const top = items.length ? items[0].start : 0;
  const bottom = items.length ? virtual.getTotalSize() - items[items.length - 1].end : 0;
  const width = table.getTotalSize();

  return (
    <div className="grid-scroll" ref={scroller} data-testid="grid">
      <table style={{ width }}>
        <thead>
          {table.getHeaderGroups().map((group) => (
            <tr key={group.id}>
              {group.headers.map((header) => {
                const key = header.column.id;
                const sortable = header.column.getCanSort();
                const field = (header.column.columnDef.meta as { field?: Field } | undefined)?.field;
                const active = query.sort === key;
                return (
                  <th key={header.id} style={{ width: header.getSize() }} data-column={key} aria-sort={active ? (query.order === "asc" ? "ascending" : "descending") : "none"}>
                    {sortable ? (
                      <button className="sort" onClick={() => onSort(key)} title={field && !field.sortable ? "This column's index is still building" : "Sort by this column"}>
                        {flexRender(header.column.columnDef.header, header.getContext())}
                        {active ? (query.order === "asc" ? " ▲" : " ▼") : ""}
                        {field && !field.sortable ? " ⏳" : ""}
                      </button>
                    ) : (
                      flexRender(header.column.columnDef.header, header.getContext())
                    )}
                  </th>
                );
              })}
            </tr>
          ))}
        </thead>
        <tbody>
          {top > 0 ? <tr style={{ height: top }} aria-hidden /> : null}
          {items.map((item) => {
            const row = rows[item.index];
            if (!row) {
              return (
                <tr key="loader" className="loader" style={{ height: ROW_HEIGHT }}>
                  <td colSpan={columns.length}>Loading more…</td>
                </tr>
              );
            }
            return (
              <tr
                key={row.id}
                style={{ height: ROW_HEIGHT }}
                data-index={item.index}
                data-num={row.original.num}
                data-id={row.original.id}
                onClick={() => (window.location.hash = `#/i/${row.original.id}`)}
              >
                {row.getVisibleCells().map((cell) => (
                  <td key={cell.id} data-column={cell.column.id}>
                    {flexRender(cell.column.columnDef.cell, cell.getContext())}
                  </td>
                ))}
              </tr>
            );
          })}
          {bottom > 0 ? <tr style={{ height: bottom }} aria-hidden /> : null}
        </tbody>
      </table>
      {!pages.loading && !pages.error && rows.length === 0 && !pages.next ? <Empty>No issues match.</Empty> : null}
      {!pages.loading && !pages.next && rows.length > 0 ? <p className="end muted" data-testid="grid-end">{rows.length} issues</p> : null}
    </div>
  );
}

function widthOf(type: FieldType): number {
  return type === "text" ? 200 : type === "datetime" ? 190 : 120;
}

function NewIssue({ projectId, onCreated }: { projectId: string; onCreated: () => void }) {
  const [title, setTitle] = useState("");
  const action = useAction();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await action.run(() => send("POST", `/projects/${enc(projectId)}/issues`, { title: title.trim() }));
    if (ok) {
      setTitle("");
      noteWrite();
      onCreated();
    }
  };
  return (
    <form className="inline" onSubmit={submit} aria-label="New issue">
      <input name="issue-title" placeholder="New issue title" value={title} onChange={(e) => setTitle(e.target.value)} required />
      <button type="submit" disabled={action.busy}>Create issue</button>
      <ErrorBox error={action.error} />
    </form>
  );
}

function NewField({ projectId, onCreated }: { projectId: string; onCreated: () => void }) {
  const [name, setName] = useState("");
  const [type, setType] = useState<FieldType>("text");
  const [options, setOptions] = useState("");
  const action = useAction();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const body: Record<string, unknown> = { name: name.trim(), type };
    if (type === "select") body.options = options.split(",").map((o) => o.trim()).filter(Boolean);
    const ok = await action.run(() => send("POST", `/projects/${enc(projectId)}/fields`, body));
    if (ok) {
      setName("");
      setOptions("");
      onCreated();
    }
  };
  return (
    <form className="inline" onSubmit={submit} aria-label="New field">
      <input name="field-name" placeholder="New field name" value={name} onChange={(e) => setName(e.target.value)} required />
      <select name="field-type" value={type} onChange={(e) => setType(e.target.value as FieldType)}>
        {(["text", "number", "date", "datetime", "select"] as const).map((t) => (
          <option key={t} value={t}>{t}</option>
        ))}
      </select>
      {type === "select" ? (
        <input name="field-options" placeholder="Options, in order: low, medium, high" value={options} onChange={(e) => setOptions(e.target.value)} required />
      ) : null}
      <button type="submit" disabled={action.busy}>Add field</button>
      <ErrorBox error={action.error} />
    </form>
  );
}
