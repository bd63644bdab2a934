#!/usr/bin/env bash
# Fails when git tracks an executable binary (ELF, Mach-O, PE/COFF) or a
# compiled Go test binary (*.test): built files belong in dist/ or a temporary
# directory, never in the repository, where every clone would carry them for
# ever. Reads each tracked file's first bytes; needs nothing but bash and git.
# Usage: .ci/no-binaries.sh [REPO_DIR]   (default: the repository it is in)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"

found=0
while IFS= read -r -d '' f; do
	[[ -f "$f" && ! -L "$f" ]] || continue
	kind=""
	case "$f" in *.test) kind="Go test binary" ;; esac
	if [[ -z "$kind" ]]; then
		magic="$(LC_ALL=C head -c 4 -- "$f" | od -An -tx1 | tr -d ' \n')"
		case "$magic" in
		7f454c46) kind="ELF executable" ;;
		feedface | feedfacf | cefaedfe | cffaedfe) kind="Mach-O executable" ;;
		cafebabe | bebafeca) # a universal Mach-O binary, or a Java class (whose bytes 5-8 are its version)
			[[ "$f" == *.class ]] || kind="Mach-O universal executable" ;;
		4d5a*) # "MZ": a DOS/PE header, unless it is text that starts so (no NUL in its first KiB)
			[[ "$(LC_ALL=C head -c 1024 -- "$f" | tr -d '\000' | wc -c)" -lt "$(LC_ALL=C head -c 1024 -- "$f" | wc -c)" ]] &&
				kind="PE/COFF (Windows) executable" ;;
		esac
	fi
	if [[ -n "$kind" ]]; then
		echo "tracked binary: $f ($kind, $(wc -c <"$f") bytes): git rm --cached it and ignore it" >&2
		found=1
	fi
done < <(git ls-files -z)
if [[ $found -ne 0 ]]; then
	exit 1
fi
echo "no executable binary is tracked ($(git ls-files | wc -l) files)"
