// Workspaces: the caller's own (create, choose), invitations to them, and — for the token's
// workspace — its members with roles and its pending invitations.
import { useState, type FormEvent } from "react";
import { ApiError, enc, get, send, type Invitation, type Member, type Page, type Workspace } from "../api";
import { claimsOf, renew, token } from "../auth";
import { Empty, ErrorBox, LoadState, PagesError, useAction, useLoad, usePages } from "../ui";

const ROLES = ["owner", "admin", "member", "viewer"];

/** After choosing a workspace the next token names it: get one and start over in it. */
async function switchTo(id: string) {
  await send("PUT", "/me/workspace", { id });
  await renew();
  window.location.hash = "#/";
  window.location.reload();
}

export function WorkspacePage() {
  const tenant = claimsOf(token() ?? "")?.tenant;
  return (
    <section className="workspace">
      <h1>Workspace</h1>
      {tenant ? <Current /> : <p className="muted">Your token names no workspace yet: create one or accept an invitation, then use it.</p>}
      <Mine />
      <MyInvitations />
    </section>
  );
}

function Mine() {
  const load = useLoad(() => get<Page<Workspace>>("/me/workspaces?limit=100"), "mine");
  const [name, setName] = useState("");
  const action = useAction();
  const create = async (e: FormEvent) => {
    e.preventDefault();
    await action.run(async () => {
      const ws = await send<Workspace>("POST", "/workspaces", { name: name.trim() });
      await switchTo(ws.id);
    });
  };
  return (
    <section className="panel">
      <h2>Your workspaces</h2>
      <LoadState load={load}>
        {(page) =>
          page.items.length === 0 ? (
            <Empty>You belong to no workspace yet.</Empty>
          ) : (
            <ul className="list" data-testid="my-workspaces">
              {page.items.map((w) => (
                <li key={w.id}>
                  {w.name} <span className="muted">{w.role}</span>{" "}
                  <button className="link" onClick={() => void action.run(() => switchTo(w.id))}>Use</button>
                </li>
              ))}
            </ul>
          )
        }
      </LoadState>
      <form className="inline" onSubmit={create}>
        <input name="workspace-name" placeholder="New workspace name" value={name} onChange={(e) => setName(e.target.value)} required />
        <button type="submit" disabled={action.busy}>Create workspace</button>
      </form>
      <ErrorBox error={action.error} />
    </section>
  );
}

function MyInvitations() {
  const load = useLoad(() => get<Page<Invitation>>("/me/invitations?limit=100"), "invitations");
  const action = useAction();
  return (
    <section className="panel">
      <h2>Invitations to you</h2>
      <LoadState load={load}>
        {(page) =>
          page.items.length === 0 ? (
            <Empty>No pending invitations for your verified email.</Empty>
          ) : (
            <ul className="list">
              {page.items.map((i) => (
                <li key={i.id}>
                  {i.workspace?.name} as {i.role}{" "}
                  <button
                    className="link"
                    onClick={() =>
                      void action.run(async () => {
                        await send("POST", `/invitations/${enc(i.id)}/accept`);
                        if (i.workspace) await switchTo(i.workspace.id);
                      })
                    }
                  >
                    Accept
                  </button>
                </li>
              ))}
            </ul>
          )
        }
      </LoadState>
      <ErrorBox error={action.error} />
    </section>
  );
}

function Current() {
  const load = useLoad(async () => {
    try {
      return await get<Workspace>("/workspace");
    } catch (e) {
      // An operator-provisioned tenant has no workspace record and no roles.
      if (e instanceof ApiError && e.status === 404) return null;
      throw e;
    }
  }, "current");
  return (
    <LoadState load={load}>
      {(ws) =>
        ws === null ? (
          <p className="muted">This tenant was provisioned by an operator: everyone in it may do everything, and it has no members to manage.</p>
        ) : (
          <>
            <h2 data-testid="workspace-name">{ws.name}</h2>
            <Members />
            <Invitations />
          </>
        )
      }
    </LoadState>
  );
}

function Members() {
  const pages = usePages<Member>("/workspace/members?limit=100", (u) => get<Page<Member>>(u));
  const [user, setUser] = useState("");
  const [role, setRole] = useState("member");
  const action = useAction();
  const put = (id: string, r: string) =>
    action.run(async () => {
      await send("PUT", `/workspace/members/${enc(id)}`, { role: r });
      pages.reload();
    });
  const remove = (id: string) =>
    action.run(async () => {
      await send("DELETE", `/workspace/members/${enc(id)}`);
      pages.reload();
    });
  return (
    <section className="panel">
      <h2>Members</h2>
      <PagesError pages={pages} />
      <table className="plain" data-testid="members">
        <tbody>
          {pages.items.map((m) => (
            <tr key={m.id}>
              <td>{m.display_name ?? m.id}</td>
              <td>
                <select aria-label={`Role of ${m.id}`} value={m.role} onChange={(e) => void put(m.id, e.target.value)}>
                  {ROLES.map((r) => <option key={r}>{r}</option>)}
                </select>
              </td>
              <td><button className="link danger" onClick={() => void remove(m.id)}>Remove</button></td>
            </tr>
          ))}
        </tbody>
      </table>
      {pages.next ? <button className="link" onClick={pages.more}>More members</button> : null}
      <form
        className="inline"
        onSubmit={(e) => {
          e.preventDefault();
          void put(user.trim(), role).then((ok) => ok && setUser(""));
        }}
      >
        <input aria-label="Member user id" placeholder="user id" value={user} onChange={(e) => setUser(e.target.value)} required />
        <select aria-label="New member role" value={role} onChange={(e) => setRole(e.target.value)}>
          {ROLES.map((r) => <option key={r}>{r}</option>)}
        </select>
        <button type="submit">Add member</button>
      </form>
      <ErrorBox error={action.error} />
    </section>
  );
}

function Invitations() {
  const pages = usePages<Invitation>("/workspace/invitations?limit=100", (u) => get<Page<Invitation>>(u));
  const [email, setEmail] = useState("");
  const [role, setRole] = useState("member");
  const action = useAction();
  const invite = async (e: FormEvent) => {
    e.preventDefault();
    const ok = await action.run(() => send("POST", "/workspace/invitations", { email: email.trim(), role }));
    if (ok) {
      setEmail("");
      pages.reload();
    }
  };
  const revoke = (id: string) =>
    action.run(async () => {
      await send("DELETE", `/workspace/invitations/${enc(id)}`);
      pages.reload();
    });
  return (
    <section className="panel">
      <h2>Pending invitations</h2>
      <PagesError pages={pages} />
      {!pages.loading && !pages.error && pages.items.length === 0 ? <Empty>No pending invitations.</Empty> : null}
      <ul className="list" data-testid="invitations">
        {pages.items.map((i) => (
          <li key={i.id}>
            {i.email} <span className="muted">{i.role}</span>{" "}
            <button className="link danger" onClick={() => void revoke(i.id)}>Revoke</button>
          </li>
        ))}
      </ul>
      {pages.next ? <button className="link" onClick={pages.more}>More invitations</button> : null}
      <form className="inline" onSubmit={invite}>
        <input aria-label="Invite email" type="email" placeholder="email" value={email} onChange={(e) => setEmail(e.target.value)} required />
        <select aria-label="Invite role" value={role} onChange={(e) => setRole(e.target.value)}>
          {ROLES.map((r) => <option key={r}>{r}</option>)}
        </select>
        <button type="submit">Invite</button>
      </form>
      <ErrorBox error={action.error} />
    </section>
  );
}
