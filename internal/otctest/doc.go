// Package otctest holds test helpers for OTC servers, shared by the tests
// of several packages.
package otctest
