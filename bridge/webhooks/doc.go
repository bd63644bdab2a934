// Package webhooks delivers signed webhooks of task events to the
// endpoints an operator configured (docs/long-running.md, Webhooks): a task completed,
// failed, needs input, or was cancelled.
//
// Signing follows Standard Webhooks 1.0 (the standard-webhooks
// specification, spec/standard-webhooks.md): each delivery is a POST of a
// JSON body with the headers webhook-id (unique per message, the same on
// every retry of it), webhook-timestamp (Unix seconds of the attempt) and
// webhook-signature: "v1," and the base64 of HMAC-SHA256 over
// "<webhook-id>.<webhook-timestamp>.<body>", one such entry per secret of
// the endpoint, separated by spaces, so that a receiver that knows either
// the old or the new secret verifies the messages sent during a rotation.
// A secret is written "whsec_" + base64 of its 24 to 64 key bytes.
//
// Sending never holds the caller up: Send encodes the event once and puts
// it on each subscribed endpoint's bounded queue (Options.QueueSize), of
// which one share (Event.Share: one principal's) may hold at most
// Options.PerShare; a message that does not fit is dropped and counted.
// A few workers per endpoint (Options.Workers) deliver the queue: an
// attempt is bounded by the endpoint's Timeout; one that fails — a network
// error, an answer other than 2xx — is retried after an exponential
// backoff with jitter (Retry.First doubling up to Retry.MaxInterval, each
// wait drawn between half of it and all of it), for at most Retry.For
// after the first attempt and Retry.MaxAttempts attempts in all; then the
// message has failed. Receivers must tolerate a message more than once
// (the same webhook-id) and out of order.
//
// The HTTP client is the hardened one of mcp/oauth (oauth.NewHTTPClient):
// a redirect is never followed for a POST (a 3xx is a failed attempt, and
// its target never sees the message), and the dial guard connects only to
// public addresses, or to one in the endpoint's AllowNetworks: a receiver
// on loopback, a private, shared or link-local network is refused unless
// the operator allowed its network, every address a name resolves to is
// checked, and the connection goes to the address checked.
//
// What leaves the process: the body holds the event's type, the time, and
// the task's id, status, tool name and times (Event), never a principal, a
// token, a secret, an argument or a result. Logs name the endpoint
// without its query, the message id, the event and the task id, never a
// secret or a signature. Metrics count delivered, retried, failed and
// dropped messages per endpoint origin and event
// (mcpotc_webhook_deliveries_total).
//
// Close stops taking events and drains the queues within its context:
// each queued message gets an attempt without waiting for a backoff, one
// waiting for a retry gets its attempt at once; what fails then, or is
// still queued when the context ends, is dropped and counted.
//
// A nil *Sender sends nothing, so that callers call it unconditionally.
package webhooks
