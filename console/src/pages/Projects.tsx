import { useState, type FormEvent } from "react";
import { get, send, type Page, type Project } from "../api";
import { Empty, ErrorBox, Link, LoadState, useAction, useLoad } from "../ui";

export function Projects() {
  const load = useLoad(() => get<Page<Project>>("/projects?limit=100"), "projects");
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
      <LoadState load={load} what="projects">
        {(page) =>
          page.items.length === 0 ? (
            <Empty>No projects yet: create the first one below.</Empty>
          ) : (
            <ul className="list" data-testid="projects">
              {page.items.map((p) => (
                <li key={p.id}>
                  <Link to={`/p/${p.id}`}>{p.name}</Link>
                </li>
              ))}
            </ul>
          )
        }
      </LoadState>
      <form className="inline" onSubmit={create}>
        <input name="project-name" placeholder="New project name" value={name} onChange={(e) => setName(e.target.value)} required />
        <button type="submit" disabled={action.busy}>Create project</button>
      </form>
      <ErrorBox error={action.error} />
    </section>
  );
}
