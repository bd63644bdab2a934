// An MCP client built on the official TypeScript SDK (@modelcontextprotocol/sdk),
// run by e2e_mcpfront_test.go under Node >= 22: a second, independent client
// of `mcpotc serve-mcp`. It connects, lists the tools, makes the acceptance
// calls and prints what it saw as one JSON object on stdout; the Go test
// makes the assertions.
//
// Environment:
//   MCPOTC_PEERS           node_modules holding @modelcontextprotocol/sdk
//   MCPOTC_TS_TRANSPORT    stdio or http
//   MCPOTC_TS_TARGET       stdio: the mcpotc binary (run as `serve-mcp`); http: the /mcp URL
//   MCPOTC_TS_URL_ELICIT   "1": declare capabilities.elicitation.url
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const peers = process.env.MCPOTC_PEERS;
const sdk = (p) => import(pathToFileURL(path.join(peers, '@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { McpError } = await sdk('types.js');

const transportName = process.env.MCPOTC_TS_TRANSPORT;
const target = process.env.MCPOTC_TS_TARGET;
const urlElicit = process.env.MCPOTC_TS_URL_ELICIT === '1';

const capabilities = urlElicit ? { elicitation: { url: {} } } : {};
const client = new Client({ name: 'mcpotc-e2e-ts-sdk', version: '0.0.0' }, { capabilities });
let transport;
if (transportName === 'stdio') {
  transport = new StdioClientTransport({ command: target, args: ['serve-mcp'], stderr: 'inherit' });
} else {
  transport = new StreamableHTTPClientTransport(new URL(target));
}

const out = { sdkVersion: null, protocolVersion: null, serverInfo: null, tools: [], calls: [] };
const timeout = { timeout: 20000 };
try {
  await client.connect(transport, timeout);
  out.protocolVersion = transport.protocolVersion ?? null;
  out.serverInfo = client.getServerVersion();
  // Follow every cursor.
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {}, timeout);
    out.tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);

  const calls = [
    ['Calculator_Add', { a: 10, b: 5 }],
    ['Calculator_Add', { a: 10, b: 'infinity' }],
    ['No_Such_Tool', {}],
    ['Doorbell_Ring', { doorbell_id: 'doorbell1' }],
    ['System_GetTimestamp', {}],
    ['Gmail_GetEmails', {}],
  ];
  for (const [name, args] of calls) {
    const c = { name, args };
    try {
      // callTool also validates structuredContent against the tool's outputSchema.
      c.result = await client.callTool({ name, arguments: args }, undefined, timeout);
    } catch (e) {
      if (e instanceof McpError) {
        c.error = { code: e.code, message: e.message, data: e.data ?? null };
      } else {
        c.error = { code: null, message: String(e?.stack ?? e) };
      }
    }
    out.calls.push(c);
  }
} catch (e) {
  out.fatal = String(e?.stack ?? e);
} finally {
  try {
    await client.close();
  } catch (e) {
    out.closeError = String(e?.stack ?? e);
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
