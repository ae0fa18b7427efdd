// The shell: sign-in, the navigation bar and a hash router (#/p/{id}, #/i/{id}, …), so the
// static files need no server-side routes.
import { Component, useEffect, useState, type ReactNode } from "react";
import { claimsOf, signOut, SIGNED_OUT, token } from "./auth";
import { Link } from "./ui";
import { SignIn } from "./pages/SignIn";
import { Projects } from "./pages/Projects";
import { Grid } from "./pages/Grid";
import { IssuePage } from "./pages/Issue";
import { Inbox } from "./pages/Inbox";
import { ViewsPage, ViewPage } from "./pages/Views";
import { WorkspacePage } from "./pages/Workspace";

function useHash(): string {
  const [hash, setHash] = useState(() => window.location.hash.slice(1) || "/");
  useEffect(() => {
    const on = () => setHash(window.location.hash.slice(1) || "/");
    window.addEventListener("hashchange", on);
    return () => window.removeEventListener("hashchange", on);
  }, []);
  return hash;
}

function route(path: string) {
  const [pathname] = path.split("?");
  let parts: string[];
  try {
    parts = pathname.split("/").filter(Boolean).map(decodeURIComponent);
  } catch {
    return <p className="error">This address is malformed.</p>;
  }
  switch (parts[0]) {
    case "p":
      return parts[2] === "views" ? <ViewsPage projectId={parts[1]} /> : <Grid key={parts[1]} projectId={parts[1]} />;
    case "v":
      return <ViewPage key={parts[1]} viewId={parts[1]} />;
    case "i":
      return <IssuePage key={parts[1]} issueId={parts[1]} />;
    case "inbox":
      return <Inbox />;
    case "workspace":
      return <WorkspacePage />;
    default:
      return <Projects />;
  }
}

/** A page that fails to render says so, instead of leaving a blank screen. */
class Boundary extends Component<{ children: ReactNode }, { error?: Error }> {
  state: { error?: Error } = {};
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  render() {
    if (this.state.error) return <div className="error" role="alert">This page failed: {this.state.error.message}</div>;
    return this.props.children;
  }
}

export function App() {
  const hash = useHash();
  const [bearer, setBearer] = useState(token());
  useEffect(() => {
    const on = () => setBearer(token());
    window.addEventListener(SIGNED_OUT, on);
    return () => window.removeEventListener(SIGNED_OUT, on);
  }, []);
  const claims = bearer ? claimsOf(bearer) : undefined;
  if (!bearer || !claims) return <SignIn onSignedIn={() => setBearer(token())} />;
  const refresh = () => setBearer(token());
  return (
    <div className="app">
      <header className="bar">
        <Link to="/" className="brand">Gridline</Link>
        <nav>
          <Link to="/">Projects</Link>
          <Link to="/inbox">Inbox</Link>
          <Link to="/workspace">Workspace</Link>
        </nav>
        <span className="who" data-testid="who">
          {claims.sub}
          {claims.tenant ? <> · <span className="tenant">{claims.tenant}</span></> : <> · no workspace</>}
        </span>
        <button
          className="link"
          onClick={() => {
            void signOut().then(refresh);
          }}
        >
          Sign out
        </button>
      </header>
      <main key={bearer}>
        {/* Keyed by the page, not its query: a new sort or filter keeps the page mounted. */}
        <Boundary key={hash.split("?")[0]}>{claims.tenant || hash.startsWith("/workspace") ? route(hash) : <WorkspacePage />}</Boundary>
      </main>
    </div>
  );
}
