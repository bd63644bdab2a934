package policy

// Override changes how a front shows one tool of an upstream (docs/operations.md,
// Tool overrides), applied when the catalog is built: the tool keeps
// its upstream's name for the calls sent to it.
type Override struct {
	// Name replaces the name the upstream lists the tool under (the
	// front's own naming — a prefix, a toolkit — still applies). Empty:
	// the upstream's.
	Name string
	// Title and Description replace the tool's. Empty: the upstream's.
	Title, Description string
	// Hidden takes the tool out of the catalog: it is neither listed nor
	// called, for any caller.
	Hidden bool
	// Task is when a call of the tool becomes an MCP task (serve-mcp;
	// docs/long-running.md, MCP tasks): "never", "always", "required" (only
	// as a task), or a duration ("2s": after that long without an
	// answer). Empty: the front's default (--task-after).
	Task string
}

// Overrides are an upstream's overrides, by the name the upstream lists
// the tool under.
type Overrides map[string]Override
