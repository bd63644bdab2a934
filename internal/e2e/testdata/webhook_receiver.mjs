// A webhook receiver for webhooks_test.go, run under Node >= 22: it
// verifies every delivery with the npm package standardwebhooks (the
// reference verifier of Standard Webhooks) and writes one JSON line per
// request to stdout: {path, ok, id, timestamp, type, taskId, error}.
//
//   RECEIVER_PORT     listens on 127.0.0.1:RECEIVER_PORT ("listening" on stderr)
//   RECEIVER_SECRETS  a JSON object: path → the one secret (whsec_…) that
//                     verifies the deliveries to that path
//   REDIRECT_TO       POST /redirect answers 302 with this Location
//   MCPOTC_PEERS      the node_modules holding standardwebhooks
//
// A verified delivery is answered 204, one that does not verify 401 (the
// sender retries it; the line says why). GET /ready answers 200.
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(path.join(process.env.MCPOTC_PEERS, '..', 'receiver.cjs'));
const { Webhook } = require('standardwebhooks');

const port = Number(process.env.RECEIVER_PORT);
const secrets = JSON.parse(process.env.RECEIVER_SECRETS || '{}');
const redirectTo = process.env.REDIRECT_TO || '';

const record = (r) => process.stdout.write(JSON.stringify(r) + '\n');

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const url = new URL(req.url, 'http://receiver');
    if (req.method === 'GET' && url.pathname === '/ready') {
      res.writeHead(200).end('ready');
      return;
    }
    const body = Buffer.concat(chunks).toString('utf8');
    const line = { path: url.pathname, id: req.headers['webhook-id'] || '', timestamp: req.headers['webhook-timestamp'] || '' };
    if (url.pathname === '/redirect') {
      record({ ...line, ok: false, error: 'redirected' });
      res.writeHead(302, { Location: redirectTo }).end();
      return;
    }
    const secret = secrets[url.pathname];
    if (!secret) {
      record({ ...line, ok: false, error: 'no secret for this path' });
      res.writeHead(404).end();
      return;
    }
    try {
      const event = new Webhook(secret).verify(body, req.headers);
      record({ ...line, ok: true, type: event.type, taskId: event.data.taskId });
      res.writeHead(204).end();
    } catch (e) {
      record({ ...line, ok: false, error: String(e && e.message) });
      res.writeHead(401).end();
    }
  });
});
server.listen(port, '127.0.0.1', () => process.stderr.write('listening\n'));
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
