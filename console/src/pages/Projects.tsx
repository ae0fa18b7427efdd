import { useState, type FormEvent } from "react";
import { get, send, type Page, type Project } from "../api";
import { Empty, ErrorBox, Link, Loading, PagesError, useAction, usePages } from "../ui";

export function Projects() {
  const pages = usePages<Project>("/projects?limit=100", (u) => get<Page<Project>>(u));
  const [name, setName] = useState("");
  const action = useAction();
  const create = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await action.run(async () => {
      const project = await send<Project>("POST", "/projects", { name: name.trim() });
      window.location.hash = `#/p/${project.id}`;
    });
    if (ok) setName("");
  };
  return (
    <section>
      <h1>Projects</h1>
      <PagesError pages={pages} />
      {pages.loading && pages.items.length === 0 ? <Loading what="projects" /> : null}
      {!pages.loading && !pages.error && pages.items.length === 0 ? <Empty>No projects yet: create the first one below.</Empty> : null}
      <ul className="list" data-testid="projects">
        {pages.items.map((p) => (
          <li key={p.id}>
            <Link to={`/p/${p.id}`}>{p.name}</Link>
          </li>
        ))}
      </ul>
      {pages.next ? <button className="link" onClick={pages.more}>More projects</button> : null}
      <form className="inline" onSubmit={create}>
        <input name="project-name" placeholder="New project name" value={name} onChange={(e) => setName(e.target.value)} required />
        <button type="submit" disabled={action.busy}>Create project</button>
      </form>
      <ErrorBox error={action.error} />
    </section>
  );
}
