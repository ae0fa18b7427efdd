// The inboxes: "my issues" (by role) and "my teams' issues", newest update first.
import { useState } from "react";
import { get, withQuery, type Page, type Summary } from "../api";
import { usePages } from "../ui";
import { IssueList } from "./Issue";

export function Inbox() {
  const [tab, setTab] = useState<"mine" | "teams">("mine");
  const [role, setRole] = useState("");
  const [state, setState] = useState("open");
  const path =
    tab === "mine" ? withQuery("/me/issues", { role, state, limit: 50 }) : withQuery("/me/teams/issues", { state, limit: 50 });
  const pages = usePages<Summary>(path, (u) => get<Page<Summary>>(u));
  return (
    <section>
      <h1>Inbox</h1>
      <div className="tabs" role="tablist">
        <button role="tab" aria-selected={tab === "mine"} onClick={() => setTab("mine")}>My issues</button>
        <button role="tab" aria-selected={tab === "teams"} onClick={() => setTab("teams")}>My teams' issues</button>
      </div>
      <div className="controls">
        {tab === "mine" ? (
          <label>
            Role
            <select value={role} onChange={(e) => setRole(e.target.value)}>
              <option value="">any</option>
              <option value="assignee">assignee</option>
              <option value="reporter">reporter</option>
              <option value="watcher">watcher</option>
            </select>
          </label>
        ) : null}
        <label>
          State
          <select value={state} onChange={(e) => setState(e.target.value)}>
            <option value="open">open</option>
            <option value="closed">closed</option>
          </select>
        </label>
        <button className="link" onClick={pages.reload}>Refresh</button>
      </div>
      <div data-testid="inbox">
        <IssueList pages={pages} empty={tab === "mine" ? "Nothing for you here." : "Nothing for your teams here."} />
      </div>
    </section>
  );
}
