// Package wiretest is what the conformance runners share: the vectors
// under testdata/conformance are txtar archives whose sections hold HTTP
// messages or JSON-RPC frames, with placeholders (<uuid>, <number:name>, …)
// where a value varies, and {{name}} for a value captured earlier. This
// package reads those messages strictly, compares what a server sent with
// what a vector expects (Matcher), and writes a message back in a vector's
// form for -update (Writer). Each runner keeps what is its own: the
// sections it knows, how it starts the server, what it sends.
//
// It is for tests only; nothing outside _test.go files imports it.
package wiretest
