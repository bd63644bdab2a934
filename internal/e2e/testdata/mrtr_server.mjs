// A 2026-07-28-only MCP server on the official TypeScript SDK
// (@modelcontextprotocol/server 2.4.0, legacy: 'reject'), run by
// modern_auth_test.go under Node >= 22 behind `mcpotc serve-otc`: tools
// that stop a call to ask for input with input_required (multi round-trip
// requests), as the SDK steers server authors to:
//
//   connect {repo}  asks the user to open a URL (inputRequired.elicitUrl)
//                   with a requestState sealed by the SDK's own HMAC codec
//                   (createRequestStateCodec, verified by the seam before
//                   the handler runs); a retry that brings that state and
//                   an "accept" for the URL request finishes the call.
//   profile         asks for a form (inputRequired.elicit), which an OTC
//                   client cannot fill.
//   echo {message}  no input needed.
//
// Every tools/call to connect is written to stderr as one line
//   mrtr-call {"repo":…,"round":…|null,"answer":…|null}
// (round: the requestState's payload as the codec verified it; answer:
// the action of the inputResponses entry "github"), so that the test
// compares what the server saw as data.
//
// MRTR_PORT: streamable HTTP at http://127.0.0.1:MRTR_PORT/mcp;
// MRTR_DELAY_MS: wait that long before listening (a server that starts
// slowly); "mrtr listening" goes to stderr once it listens.
// MCPOTC_PEERS is the node_modules holding the SDK.
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const peers = process.env.MCPOTC_PEERS;
const { McpServer, createMcpHandler, inputRequired, inputResponse, createRequestStateCodec, fromJsonSchema } = await import(
  pathToFileURL(path.join(peers, '@modelcontextprotocol/server/dist/index.mjs')).href
);
const port = Number(process.env.MRTR_PORT || 0);
const delay = Number(process.env.MRTR_DELAY_MS || 0);

// One key for the process: every round of a flow reaches this process.
const codec = createRequestStateCodec({ key: 'mcpotc-e2e-request-state-key-0123456789', ttlSeconds: 600 });
let rounds = 0;

function makeServer() {
  const s = new McpServer(
    { name: 'mrtr-ts-server', version: '2.4.0' },
    { capabilities: { tools: {} }, requestState: { verify: codec.verify } },
  );
  s.registerTool(
    'connect',
    {
      description: 'Connects a repository; the user must authorize GitHub first.',
      inputSchema: fromJsonSchema({
        type: 'object',
        properties: { repo: { type: 'string', description: 'The repository' } },
        required: ['repo'],
      }),
    },
    async (args, ctx) => {
      const answer = inputResponse(ctx.mcpReq.inputResponses, 'github');
      const state = ctx.mcpReq.requestState();
      const action = answer.kind === 'elicit' ? answer.action : null;
      console.error('mrtr-call ' + JSON.stringify({ repo: args.repo, round: state ? state.round : null, answer: action }));
      if (action === 'accept' && state && state.repo === args.repo) {
        return { content: [{ type: 'text', text: `connected ${args.repo} after round ${state.round}` }] };
      }
      rounds++;
      return inputRequired({
        inputRequests: {
          github: inputRequired.elicitUrl({
            message: 'Authorize GitHub for mcpotc',
            url: `https://github.example/login/oauth/authorize?round=${rounds}`,
          }),
        },
        requestState: await codec.mint({ repo: args.repo, round: rounds }),
      });
    },
  );
  s.registerTool('profile', { description: 'Asks the user for a name.', inputSchema: fromJsonSchema({ type: 'object', properties: {} }) }, async () =>
    inputRequired({
      inputRequests: {
        name: inputRequired.elicit({
          message: 'What is your name?',
          requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
        }),
      },
    }),
  );
  s.registerTool(
    'echo',
    {
      description: 'Echoes its message.',
      inputSchema: fromJsonSchema({ type: 'object', properties: { message: { type: 'string', description: 'The text' } }, required: ['message'] }),
    },
    async (args) => ({ content: [{ type: 'text', text: String(args.message) }] }),
  );
  return s;
}

const handler = createMcpHandler(makeServer, { legacy: 'reject' });
const serve = async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined) headers.append(k, one);
  }
  const abort = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) abort.abort();
  });
  const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Buffer.concat(chunks);
  const response = await handler.fetch(
    new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body, signal: abort.signal }),
  );
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body) {
    try {
      for await (const chunk of response.body) res.write(chunk);
    } catch {
      // the client went away
    }
  }
  res.end();
};
const server = http.createServer((req, res) => {
  if (new URL(req.url, 'http://x').pathname !== '/mcp') {
    res.writeHead(404).end();
    return;
  }
  serve(req, res).catch((err) => {
    console.error('mrtr_server:', err);
    if (!res.headersSent) res.writeHead(500);
    res.end();
  });
});
setTimeout(() => server.listen(port, '127.0.0.1', () => console.error(`mrtr listening on 127.0.0.1:${server.address().port}`)), delay);
