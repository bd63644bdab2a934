// Package conntest holds test helpers at the connection level, shared by
// the tests of the HTTP clients of several packages.
package conntest
