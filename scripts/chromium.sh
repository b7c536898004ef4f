#!/usr/bin/env bash
# chromium.sh: print the path of a Chromium the browser test of dblock ui
# (ui/browsertest) can drive, installing Debian's chromium (apt-get, as
# root) when none is found. It exits non-zero, saying why, when none can be
# had; the test then fails under CI=true.
set -euo pipefail

find_chromium() {
	local c
	for c in chromium chromium-browser google-chrome-stable google-chrome; do
		if command -v "$c" >/dev/null; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}

if find_chromium; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "chromium.sh: no chromium found and not root to install it (apt-get install chromium)" >&2
	exit 1
fi
echo "chromium.sh: apt-get install chromium" >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2 ||
	{ apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2; }
find_chromium || { echo "chromium.sh: chromium installed but not found on PATH" >&2; exit 1; }
