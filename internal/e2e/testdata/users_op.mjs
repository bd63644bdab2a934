// An OpenID Provider built on oidc-provider (panva/node-oidc-provider), run
// by browser_test.go under Node >= 22: the provider users sign in at
// before an authorization with user_verification oidc, with the library's
// own sign-in pages, whose "[ Cancel ]" link declines (the provider then
// answers access_denied). Any login name signs in, as the subject of that
// name.
//
// Environment:
//   MCPOTC_PEERS    node_modules holding oidc-provider
//   OP_PORT         the port to listen on (127.0.0.1)
//   OP_REDIRECT     the bridge's /oauth/login (the one client's redirect URI)
// It prints "listening" on stdout once it serves.
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const peers = process.env.MCPOTC_PEERS;
const { default: Provider } = await import(pathToFileURL(path.join(peers, 'oidc-provider', 'lib', 'index.js')).href);
const port = Number(process.env.OP_PORT);
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: 'mcpotc',
    client_secret: 'op-secret',
    redirect_uris: [process.env.OP_REDIRECT],
    grant_types: ['authorization_code'],
    response_types: ['code'],
  }],
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  cookies: { keys: ['mcpotc-e2e-users-op-cookie-key'] },
  features: { devInteractions: { enabled: true } },
});
provider.listen(port, '127.0.0.1', () => process.stdout.write('listening\n'));
