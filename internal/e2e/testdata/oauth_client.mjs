// An MCP client built on the official TypeScript SDK with its OAuth client
// provider, run by oauth_test.go under Node >= 22 against `mcpotc serve-mcp`
// as an OAuth protected resource. It connects (the SDK discovers the
// protected resource metadata, the authorization server, registers, and
// asks for authorization), follows the authorization redirect as a browser
// would (the demo authorization server approves at once) to read the code,
// finishes the flow, lists the tools and calls one; it prints what it saw
// as one JSON object on stdout (the access token included: the Go test
// reuses it for its own requests).
//
// Environment:
//   MCPOTC_PEERS     node_modules holding @modelcontextprotocol/sdk
//   MCPOTC_MCP_URL   the /mcp URL of serve-mcp
//   MCPOTC_TOOL      the tool to call (default Calculator_Add with a=2, b=3);
//                    with it the client declares URL elicitation and, on a
//                    -32042, opens the URL (following redirects, as a
//                    browser would) and calls again, once
//   MCPOTC_TOOL_ARGS its arguments, JSON
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const peers = process.env.MCPOTC_PEERS;
const sdk = (p) => import(pathToFileURL(path.join(peers, '@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { UnauthorizedError } = await sdk('client/auth.js');
const { McpError } = await sdk('types.js');
const toolName = process.env.MCPOTC_TOOL;
const toolArgs = toolName ? JSON.parse(process.env.MCPOTC_TOOL_ARGS || '{}') : { a: 2, b: 3 };
const capabilities = toolName ? { elicitation: { url: {} } } : {};

const url = new URL(process.env.MCPOTC_MCP_URL);
// Never served: the code is read from the authorization server's redirect.
const redirectUrl = 'http://127.0.0.1:9/callback';

class Provider {
  constructor() { this.code = undefined; this.authorizations = 0; }
  get redirectUrl() { return redirectUrl; }
  get clientMetadata() {
    return { client_name: 'mcpotc-e2e-ts-oauth', redirect_uris: [redirectUrl], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' };
  }
  clientInformation() { return this._client; }
  saveClientInformation(c) { this._client = c; }
  tokens() { return this._tokens; }
  saveTokens(t) { this._tokens = t; }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
  async redirectToAuthorization(authorizationUrl) {
    this.authorizations++;
    let u = new URL(authorizationUrl);
    for (let i = 0; i < 5; i++) {
      const r = await fetch(u, { redirect: 'manual' });
      const loc = r.headers.get('location');
      if (!loc) throw new Error(`authorization stopped at ${u.origin}${u.pathname}: HTTP ${r.status}`);
      const next = new URL(loc, u);
      if (next.href.startsWith(redirectUrl)) {
        this.code = next.searchParams.get('code');
        return;
      }
      u = next;
    }
    throw new Error('too many redirects');
  }
}

// browse follows redirects as a browser does, keeping the cookies each
// host sets (fetch's own redirect following drops them, and the bridge
// binds an authorization to the browser that opened its link).
async function browse(start) {
  const jar = new Map(); // host → Map(name → value)
  let u = new URL(start);
  for (let i = 0; i < 20; i++) {
    const cookies = jar.get(u.host);
    const headers = cookies ? { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') } : {};
    const r = await fetch(u, { redirect: 'manual', headers });
    for (const c of r.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair.indexOf('=');
      if (!jar.has(u.host)) jar.set(u.host, new Map());
      jar.get(u.host).set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    const loc = r.headers.get('location');
    if (r.status < 300 || r.status >= 400 || !loc) return { status: r.status, url: u };
    u = new URL(loc, u);
  }
  throw new Error('too many redirects');
}

const provider = new Provider();
const connect = async () => {
  const client = new Client({ name: 'mcpotc-e2e-ts-oauth', version: '0.0.0' }, { capabilities });
  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  try {
    await client.connect(transport);
    return client;
  } catch (e) {
    if (!(e instanceof UnauthorizedError) || !provider.code) throw e;
    await transport.finishAuth(provider.code);
    const again = new Client({ name: 'mcpotc-e2e-ts-oauth', version: '0.0.0' }, { capabilities });
    await again.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    return again;
  }
};

const out = {};
try {
  const client = await connect();
  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => t.name).sort();
  const name = toolName ?? 'Calculator_Add';
  let res;
  try {
    res = await client.callTool({ name, arguments: toolArgs });
  } catch (e) {
    if (!(e instanceof McpError) || e.code !== -32042 || !toolName) throw e;
    const url = e.data?.elicitations?.[0]?.url;
    const page = await browse(url); // the browser: to the authorization server and back
    out.elicited = { status: page.status, path: page.url.pathname };
    res = await client.callTool({ name, arguments: toolArgs });
  }
  out.call = res.structuredContent ?? res.content;
  out.client = provider.clientInformation()?.client_id;
  out.authorizations = provider.authorizations;
  out.scope = provider.tokens()?.scope;
  out.token = provider.tokens()?.access_token;
  await client.close();
} catch (e) {
  out.error = String(e?.stack ?? e);
}
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(out.error ? 1 : 0);
