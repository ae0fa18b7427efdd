/** What the console is deployed against: read once from /config.json beside index.html. */
export interface Config {
  /** The API's base URL; empty for the page's own origin (the local stack serves both). */
  api: string;
  /** `local`: a dev sign-in minting local tokens; `cognito`: the user pool's hosted UI (PKCE). */
  auth: "local" | "cognito";
  /** Cognito: the pool's issuer, `https://cognito-idp.{region}.amazonaws.com/{pool_id}`. */
  authority?: string;
  client_id?: string;
  /** Cognito: the hosted UI's domain, for signing out (`https://{prefix}.auth.{region}.amazoncognito.com`). */
  auth_domain?: string;
}

let loaded: Config | undefined;

export async function loadConfig(): Promise<Config> {
  if (loaded) return loaded;
  const response = await fetch("config.json", { cache: "no-store" });
  if (!response.ok) throw new Error(`config.json: ${response.status}`);
  const config = (await response.json()) as Config;
  config.api = (config.api ?? "").replace(/\/+$/, "");
  loaded = config;
  return config;
}

export function config(): Config {
  if (!loaded) throw new Error("config not loaded");
  return loaded;
}
