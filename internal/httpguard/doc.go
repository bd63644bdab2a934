// Package httpguard owns the HTTP hardening that both of mcpotc's fronts
// (serve-mcp's HTTP transports, serve-otc with its /oauth/ routes, and
// sample-otc) apply to the requests they serve, and that neither may take
// from the other (otc and mcp do not import each other): the
// DNS-rebinding check of Host and Origin on a loopback listener
// (Rebinding), the bounds on reading a request body (ReadBody,
// ReadDeadline), bearer tokens read and compared in constant time (Bearer,
// EqualSecret), the client's address behind a trusted reverse proxy
// (ClientAddr), and the HTTP/1.1 message-framing rule (Handler). It
// decides; each front words its own answers.
//
// The framing rule applies before any of the fronts' handlers runs: a
// request whose framing a proxy in front may have read differently is
// answered, and then its connection is closed (RFC 9112 §6.1, §6.3), so
// that no byte after it can be taken for a request of its own (request
// smuggling, RFC 9112 §11.2).
//
// What Go's net/http does, and why the rule is what it is (read in
// net/http/transfer.go, Go 1.26): for a request with both Content-Length
// and Transfer-Encoding: chunked, readTransfer frames the body by the
// chunked coding and deletes both header fields (parseTransferEncoding
// removes Transfer-Encoding, fixLength removes Content-Length), so a
// handler sees TransferEncoding ["chunked"] and ContentLength -1 and can
// no longer tell that Content-Length was there; the server then keeps the
// connection open. For an HTTP/1.0 request it deletes Transfer-Encoding
// without a trace and frames the body by Content-Length, where RFC 9112
// §6.1 says the framing is faulty and the connection must be closed after
// the response. A request with two different Content-Length values, or a
// Transfer-Encoding other than exactly "chunked", net/http refuses itself
// (400, or 501 for an unknown coding) and closes.
//
// So Handler closes the connection after every HTTP/1.1 request framed by
// Transfer-Encoding (those that also had a Content-Length among them) and
// after every HTTP/1.0 request with a body: RFC 9112 lets a server close a
// connection after any response, and the honest clients of the fronts
// frame their bodies by Content-Length (MCP and OTC clients send one JSON
// message of known length), so they keep their connections. HTTP/2 has no
// such framing: its requests pass untouched.
package httpguard
