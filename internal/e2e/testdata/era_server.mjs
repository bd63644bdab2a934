// An MCP server on the official TypeScript SDK, run by modern_upstream_test.go
// under Node >= 22 as an upstream of `mcpotc serve-otc` in each protocol era:
//
//   ERA_SDK=1 ERA_MODE=legacy   @modelcontextprotocol/sdk 1.x: 2025-11-25 and earlier only
//   ERA_SDK=2 ERA_MODE=modern   @modelcontextprotocol/server 2.x, legacy: 'reject' (2026-07-28 only)
//   ERA_SDK=2 ERA_MODE=dual     @modelcontextprotocol/server 2.x, legacy served (both eras)
//
// ERA_TRANSPORT is stdio or http (ERA_PORT: streamable HTTP at
// http://127.0.0.1:ERA_PORT/mcp; "listening" goes to stderr once it listens).
// MCPOTC_PEERS is the node_modules holding the SDKs. Every variant serves
// the same four tools, from the same JSON Schemas: echo, add (with an
// output schema), fail (an isError result) and region (an x-mcp-header
// parameter).
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const peers = process.env.MCPOTC_PEERS;
const load = (p) => import(pathToFileURL(path.join(peers, p)).href);
const sdkVersion = process.env.ERA_SDK;
const mode = process.env.ERA_MODE;
const transport = process.env.ERA_TRANSPORT;
const port = Number(process.env.ERA_PORT || 0);

const tools = [
  {
    name: 'echo',
    description: 'Echoes its message.',
    inputSchema: { type: 'object', properties: { message: { type: 'string', description: 'The text to echo' } }, required: ['message'] },
  },
  {
    name: 'add',
    description: 'Adds two numbers.',
    inputSchema: {
      type: 'object',
      properties: { a: { type: 'number', description: 'First addend' }, b: { type: 'number', description: 'Second addend' } },
      required: ['a', 'b'],
    },
    outputSchema: { type: 'object', properties: { sum: { type: 'number', description: 'a + b' } }, required: ['sum'] },
  },
  {
    name: 'fail',
    description: 'Always fails.',
    inputSchema: { type: 'object', properties: {} },
  },
  {
    name: 'region',
    description: 'Answers with its region, an x-mcp-header parameter.',
    inputSchema: {
      type: 'object',
      properties: { region: { type: 'string', description: 'Where to run', 'x-mcp-header': 'Region' } },
      required: ['region'],
    },
  },
];

function call(name, args) {
  switch (name) {
    case 'echo':
      return { content: [{ type: 'text', text: String(args.message) }] };
    case 'add': {
      const sum = args.a + args.b;
      return { content: [{ type: 'text', text: JSON.stringify({ sum }) }], structuredContent: { sum } };
    }
    case 'fail':
      return { content: [{ type: 'text', text: 'this tool always fails' }], isError: true };
    case 'region':
      return { content: [{ type: 'text', text: String(args.region) }] };
  }
  throw new Error(`unknown tool ${name}`);
}

let makeServer;
if (sdkVersion === '1') {
  const { Server } = await load('@modelcontextprotocol/sdk/dist/esm/server/index.js');
  const { ListToolsRequestSchema, CallToolRequestSchema } = await load('@modelcontextprotocol/sdk/dist/esm/types.js');
  makeServer = () => {
    const s = new Server({ name: 'era-ts-sdk-1', version: '1.32.2' }, { capabilities: { tools: { listChanged: true } } });
    s.setRequestHandler(ListToolsRequestSchema, async () => ({ tools }));
    s.setRequestHandler(CallToolRequestSchema, async (req) => call(req.params.name, req.params.arguments ?? {}));
    return s;
  };
} else {
  const { McpServer, fromJsonSchema } = await load('@modelcontextprotocol/server/dist/index.mjs');
  makeServer = () => {
    const s = new McpServer({ name: 'era-ts-sdk-2', version: '2.4.0' }, { capabilities: { tools: { listChanged: true } } });
    for (const t of tools) {
      const config = { description: t.description, inputSchema: fromJsonSchema(t.inputSchema) };
      if (t.outputSchema) config.outputSchema = fromJsonSchema(t.outputSchema);
      s.registerTool(t.name, config, async (args) => call(t.name, args ?? {}));
    }
    return s;
  };
}

if (transport === 'stdio') {
  if (sdkVersion === '1') {
    const { StdioServerTransport } = await load('@modelcontextprotocol/sdk/dist/esm/server/stdio.js');
    await makeServer().connect(new StdioServerTransport());
  } else {
    const { serveStdio } = await load('@modelcontextprotocol/server/dist/stdio.mjs');
    serveStdio(makeServer, { legacy: mode === 'modern' ? 'reject' : 'serve' });
  }
} else {
  let serve;
  if (sdkVersion === '1') {
    // Stateless 2025-era serving: one server and transport per request.
    const { StreamableHTTPServerTransport } = await load('@modelcontextprotocol/sdk/dist/esm/server/streamableHttp.js');
    serve = async (req, res) => {
      if (req.method !== 'POST') {
        res.writeHead(405, { Allow: 'POST' }).end();
        return;
      }
      const server = makeServer();
      const t = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on('close', () => {
        t.close();
        server.close();
      });
      await server.connect(t);
      await t.handleRequest(req, res);
    };
  } else {
    const { createMcpHandler } = await load('@modelcontextprotocol/server/dist/index.mjs');
    const handler = createMcpHandler(makeServer, { legacy: mode === 'modern' ? 'reject' : 'stateless' });
    // The handler is web-standard (Request → Response): a small node:http
    // adapter, streaming the response body as it comes.
    serve = async (req, res) => {
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
  }
  const server = http.createServer((req, res) => {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    serve(req, res).catch((err) => {
      console.error('era_server:', err);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.listen(port, '127.0.0.1', () => console.error(`era_server listening on 127.0.0.1:${server.address().port}`));
}
