// Who is signed in: a bearer token (the ID token the API checks) and its claims. Locally the
// dev sign-in asks the stack's /local/token; in AWS oidc-client-ts runs Cognito's hosted UI
// with the authorization code flow and PKCE, and refreshes with the refresh token.
import { UserManager, WebStorageStateStore } from "oidc-client-ts";
import { config } from "./config";

export interface Claims {
  sub: string;
  tenant?: string;
  email?: string;
}

const TOKEN_KEY = "gridline.token";
const SIGNIN_KEY = "gridline.dev-signin";

let manager: UserManager | undefined;

function cognito(): UserManager {
  if (!manager) {
    const c = config();
    const home = window.location.origin + window.location.pathname;
    manager = new UserManager({
      authority: c.authority ?? "",
      client_id: c.client_id ?? "",
      redirect_uri: home,
      post_logout_redirect_uri: home,
      response_type: "code",
      scope: "openid email profile",
      userStore: new WebStorageStateStore({ store: window.sessionStorage }),
    });
    // The library renews the session before the token expires: send the new ID token.
    manager.events.addUserLoaded((user) => {
      if (user.id_token) keep(user.id_token);
    });
  }
  return manager;
}

/** Decodes a JWT's payload (no verification: the API verifies; this only labels the UI). */
export function claimsOf(token: string): Claims | undefined {
  try {
    const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    const json = JSON.parse(decodeURIComponent(escape(atob(part))));
    return { sub: json.sub, tenant: json["custom:tenant_id"] || undefined, email: json.email };
  } catch {
    return undefined;
  }
}

export function token(): string | undefined {
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined;
}

function keep(value: string) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

/** Finishes a hosted-UI redirect if the page is one; returns the session's token, if any. */
export async function restore(): Promise<string | undefined> {
  if (config().auth !== "cognito") return token();
  const params = new URLSearchParams(window.location.search);
  if (params.has("code") && params.has("state")) {
    const user = await cognito().signinRedirectCallback();
    window.history.replaceState({}, "", window.location.pathname + window.location.hash);
    if (user.id_token) keep(user.id_token);
  }
  const user = await cognito().getUser();
  if (user?.id_token && !user.expired) keep(user.id_token);
  else sessionStorage.removeItem(TOKEN_KEY);
  return token();
}

export interface DevSignIn {
  user: string;
  tenant: string;
  email: string;
}

/** The local stack mints what Cognito would; a tenant left empty is the trigger's choice. */
export async function devSignIn(form: DevSignIn): Promise<void> {
  const response = await fetch(`${config().api}/local/token`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      user: form.user,
      tenant: form.tenant || undefined,
      email: form.email || undefined,
      email_verified: Boolean(form.email),
    }),
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.detail ?? `sign-in failed (${response.status})`);
  sessionStorage.setItem(SIGNIN_KEY, JSON.stringify(form));
  keep(body.token);
}

export function lastDevSignIn(): DevSignIn | undefined {
  const raw = sessionStorage.getItem(SIGNIN_KEY);
  return raw ? (JSON.parse(raw) as DevSignIn) : undefined;
}

export async function cognitoSignIn(): Promise<void> {
  await cognito().signinRedirect();
}

/**
 * A new token after the chosen workspace changed: the trigger names it in the next one.
 * Locally the dev sign-in is repeated without a tenant; in AWS the refresh token is used.
 */
export async function renew(): Promise<void> {
  if (config().auth === "cognito") {
    const user = await cognito().signinSilent();
    if (user?.id_token) keep(user.id_token);
    return;
  }
  const last = lastDevSignIn();
  if (last) await devSignIn({ ...last, tenant: "" });
}

/**
 * A new token for the same session after the old one expired: the refresh token in AWS, the
 * same dev sign-in locally. False when there is no session to refresh.
 */
export async function refreshSession(): Promise<boolean> {
  if (config().auth === "cognito") {
    const user = await cognito().signinSilent();
    if (!user?.id_token) return false;
    keep(user.id_token);
    return true;
  }
  const last = lastDevSignIn();
  if (!last) return false;
  await devSignIn(last);
  return true;
}

/** The session is over (its token is refused and cannot be refreshed): back to sign-in. */
export function signedOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  window.dispatchEvent(new Event(SIGNED_OUT));
}
export const SIGNED_OUT = "gridline:signed-out";

export async function signOut(): Promise<void> {
  sessionStorage.removeItem(TOKEN_KEY);
  sessionStorage.removeItem(SIGNIN_KEY);
  if (config().auth === "cognito") {
    await cognito().removeUser();
    const c = config();
    if (c.auth_domain && c.client_id) {
      const back = encodeURIComponent(window.location.origin + window.location.pathname);
      window.location.href = `${c.auth_domain}/logout?client_id=${c.client_id}&logout_uri=${back}`;
    }
  }
}
