# mcpotc in an image FROM scratch: the static binary, CA certificates for
# https upstreams, a non-root user. No shell, no Node, no Python: upstreams
# are URLs (serve-otc --mcp URL, serve-mcp --otc URL) or the built-in
# samples, not commands (README, Install).
#
#   docker build -t mcpotc .
#   docker run --rm -p 8090:8090 mcpotc
#   docker run --rm -p 8080:8080 mcpotc serve-otc --mcp https://mcp.example.com/mcp --listen 0.0.0.0:8080
#
# The binary is built as .ci/release builds it (CI checks that it runs
# alone in such a root).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION}" -o /out/mcpotc ./cmd/mcpotc

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/mcpotc /mcpotc
USER 65532:65532
EXPOSE 8090
ENTRYPOINT ["/mcpotc"]
CMD ["serve-mcp", "--transport", "http", "--listen", "0.0.0.0:8090"]
