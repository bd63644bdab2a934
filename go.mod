module github.com/mcpotc/mcpotc

go 1.26.8

require (
	github.com/golang-jwt/jwt/v5 v5.3.1
	github.com/rs/zerolog v1.35.1
	github.com/santhosh-tekuri/jsonschema/v5 v5.3.1
	golang.org/x/tools v0.52.0
)

require (
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
