package mapping

// RPCError is the JSON-RPC error an MCP host gets for a failed OTC call
// (MCPError, MCPResult): the MCP front answers it with its own code,
// message and data (it is the front's CodedError, by its methods: mapping
// imports no transport package).
type RPCError struct {
	Code    int
	Message string
	Data    any
}

func (e *RPCError) Error() string { return e.Message }

// RPCCode is the error's JSON-RPC code.
func (e *RPCError) RPCCode() int { return e.Code }

// RPCData is the error's data (nil: none).
func (e *RPCError) RPCData() any { return e.Data }
