// Package callid scopes an OTC call_id to a principal: the call_id a
// bridge sends on for a caller is prefixed with a hash of who the caller
// is, so that two callers' call_ids never meet at the OTC server behind
// the bridge (which sees one caller: the bridge). The call_ids that go on
// unscoped (Pass: the sole chain peer's, a caller not told apart) never
// equal a scoped one: one that looks scoped is scoped in its turn, under
// a name no principal has. Both fronts use it: the MCP front for the
// call_ids its callers forward, the OTC front for those it passes to an
// MCP front further on.
package callid
