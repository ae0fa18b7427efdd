import { useState, type FormEvent } from "react";
import { cognitoSignIn, devSignIn, lastDevSignIn } from "../auth";
import { config } from "../config";
import { ErrorBox } from "../ui";

/** Local: user, tenant and email become a local token. AWS: the user pool's hosted UI. */
export function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const last = lastDevSignIn();
  const [user, setUser] = useState(last?.user ?? "");
  const [tenant, setTenant] = useState(last?.tenant ?? "");
  const [email, setEmail] = useState(last?.email ?? "");
  const [error, setError] = useState<unknown>();

  if (config().auth === "cognito") {
    return (
      <div className="signin">
        <h1>Gridline</h1>
        <button onClick={() => void cognitoSignIn().catch(setError)}>Sign in</button>
        <ErrorBox error={error} />
      </div>
    );
  }

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(undefined);
    try {
      await devSignIn({ user: user.trim(), tenant: tenant.trim(), email: email.trim() });
      onSignedIn();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form className="signin" onSubmit={submit}>
      <h1>Gridline</h1>
      <p className="muted">
        Local sign-in: the stack mints the token Cognito would. Leave the tenant empty to use the
        workspace you chose (or to create your first one).
      </p>
      <label>
        User <input name="user" value={user} onChange={(e) => setUser(e.target.value)} required autoFocus />
      </label>
      <label>
        Tenant <input name="tenant" value={tenant} onChange={(e) => setTenant(e.target.value)} placeholder="(chosen workspace)" />
      </label>
      <label>
        Email <input name="email" type="email" value={email} onChange={(e) => setEmail(e.target.value)} placeholder="(verified)" />
      </label>
      <button type="submit">Sign in</button>
      <ErrorBox error={error} />
    </form>
  );
}
