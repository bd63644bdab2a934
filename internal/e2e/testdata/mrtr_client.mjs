// A 2026-07-28 MCP host built on the official TypeScript SDK 2.x client
// (@modelcontextprotocol/client), run by mcpfront_mrtr_test.go under Node
// >= 22: it pins protocol 2026-07-28, declares URL elicitation, calls
// Gmail_GetEmails of `mcpotc serve-mcp`'s sample, and answers each URL the
// server asks its user to open as its user would (the SDK's multi
// round-trip driver retries the call with the answer and the requestState).
// It prints what it saw as one JSON object on stdout; the Go test makes the
// assertions.
//
// Environment:
//   MCPOTC_PEERS     node_modules holding @modelcontextprotocol/client
//   MRTR_TRANSPORT   stdio or http
//   MRTR_TARGET      stdio: the mcpotc binary (run as `serve-mcp`); http: the /mcp URL
//   MRTR_ACTION      what the user does at each prompt:
//                      after    open the URL and finish, then accept
//                      atonce   accept at once; the browser finishes 1 s later
//                      decline  decline
//                      cancel   dismiss (cancel)
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const peers = process.env.MCPOTC_PEERS;
const load = (p) => import(pathToFileURL(path.join(peers, '@modelcontextprotocol/client/dist', p)).href);
const { Client, StreamableHTTPClientTransport } = await load('index.mjs');
const { StdioClientTransport } = await load('stdio.mjs');

const transportName = process.env.MRTR_TRANSPORT;
const target = process.env.MRTR_TARGET;
const action = process.env.MRTR_ACTION;

const out = { prompts: [], opened: [] };
const open = async (url) => {
  const r = await fetch(url);
  out.opened.push({ url, status: r.status });
};
const pending = [];

const client = new Client(
  { name: 'mcpotc-e2e-ts-sdk-2', version: '0.0.0' },
  { capabilities: { elicitation: { url: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
);
client.setRequestHandler('elicitation/create', async (request) => {
  const p = request.params;
  out.prompts.push({ mode: p.mode, message: p.message, url: p.url });
  switch (action) {
    case 'after':
      await open(p.url);
      return { action: 'accept' };
    case 'atonce':
      pending.push(new Promise((resolve) => setTimeout(resolve, 1000)).then(() => open(p.url)));
      return { action: 'accept' };
    default:
      return { action };
  }
});

let transport;
if (transportName === 'stdio') {
  transport = new StdioClientTransport({ command: target, args: ['serve-mcp'], stderr: 'inherit' });
} else {
  transport = new StreamableHTTPClientTransport(new URL(target));
}
try {
  await client.connect(transport, { timeout: 20000 });
  out.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion ?? null;
  out.result = await client.callTool({ name: 'Gmail_GetEmails', arguments: {} }, { timeout: 30000 });
} catch (e) {
  out.error = { code: e?.code ?? null, message: String(e?.message ?? e) };
} finally {
  await Promise.allSettled(pending);
  try {
    await client.close();
  } catch (e) {
    out.closeError = String(e?.stack ?? e);
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
