#!/usr/bin/env bash
# Installs xfer for one user (or system-wide with --prefix /usr/local): the binary, a manual page
# for every command (swift-argument-parser's generate-manual plugin) and completions for bash,
# zsh and fish (`xfer --generate-completion-script`).
#
#   bash tools/install.sh                       # release build into ~/.local
#   sudo bash tools/install.sh --prefix /usr/local
#   bash tools/install.sh --binary .build/debug/xfer --configuration debug --prefix /tmp/x   # what tools/test.sh checks
#
# Then: `man xfer`, `man xfer.push` (add PREFIX/share/man to MANPATH if it is not searched), and
# tab completion in a new shell (bash: with the bash-completion package; zsh: PREFIX/share/zsh/
# site-functions on fpath; fish: found by itself).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$HOME/.local"
binary=""
configuration="release"
while (($#)); do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    --configuration) configuration="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "install: unknown argument $1 (see --help)" >&2; exit 64 ;;
  esac
done
bash tools/setup.sh
. tools/env.sh
if [ -z "$binary" ]; then
  swift build -c "$configuration" --product xfer --static-swift-stdlib
  binary=".build/$configuration/xfer"
fi
install -Dm755 "$binary" "$prefix/bin/xfer"

# One page a command (xfer.1, xfer.push.1, xfer.account.create.1, ...).
swift package plugin generate-manual --multi-page --configuration "$configuration" >/dev/null
mkdir -p "$prefix/share/man/man1"
install -m644 .build/plugins/GenerateManual/outputs/xfer/*.1 "$prefix/share/man/man1/"

"$binary" --generate-completion-script bash | install -Dm644 /dev/stdin "$prefix/share/bash-completion/completions/xfer"
"$binary" --generate-completion-script zsh | install -Dm644 /dev/stdin "$prefix/share/zsh/site-functions/_xfer"
"$binary" --generate-completion-script fish | install -Dm644 /dev/stdin "$prefix/share/fish/vendor_completions.d/xfer.fish"
pages=$(ls "$prefix/share/man/man1" | grep -c '^xfer')
echo "installed $prefix/bin/xfer, $pages manual pages in $prefix/share/man/man1, completions for bash, zsh and fish"
