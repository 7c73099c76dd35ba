#!/usr/bin/env bash
# Builds the Debian package of Heron: target/debian/heron_VERSION_ARCH.deb,
# and beside it heron_VERSION_ARCH.debug, the binary's debug information
# (the packaged binary is stripped and points to it with a GNU debuglink;
# put it at /usr/lib/debug/usr/bin/heron.debug to debug an installed
# server, or give it to gdb with `symbol-file`).
#
#   scripts/build-deb.sh              # builds the release binary first
#   scripts/build-deb.sh --no-build   # packages the release binary there is
#   DEB_VERSION=0.1.0-2 scripts/build-deb.sh --no-build   # another version
#
# Needs cargo-deb (installed here with `cargo install cargo-deb --locked`
# if missing), dpkg-dev (for the shared library dependencies) and binutils.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
[ "${1:-}" = "--no-build" ] && build=0

scripts/ensure-packages.sh dpkg-dev binutils gzip
if ! command -v cargo-deb >/dev/null 2>&1; then
    cargo install cargo-deb --locked
fi

target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
if [ "$build" = 1 ] && [ -z "${HERON_BINARY:-}" ]; then
    cargo build --release -p heron
fi
binary="${HERON_BINARY:-$target_dir/release/heron}"   # HERON_BINARY: another build to package
[ -x "$binary" ] || { echo "no release binary at $binary (build it, or drop --no-build)" >&2; exit 2; }

assets="$target_dir/deb-assets"
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"

# The binary stripped, its debug information kept in a file of its own.
objcopy --only-keep-debug "$binary" "$assets/heron.debug"
objcopy --strip-debug --strip-unneeded --add-gnu-debuglink="$assets/heron.debug" "$binary" "$assets/heron"
chmod 755 "$assets/heron"

# Man pages and completions, from the binary being packaged.
"$assets/heron" man "$assets/man"
gzip -9n "$assets"/man/*.[15]
"$assets/heron" completions bash > "$assets/completions/heron"
"$assets/heron" completions zsh > "$assets/completions/_heron"
"$assets/heron" completions fish > "$assets/completions/heron.fish"

# The unit as documented, with the packaged binary's path.
sed 's#/usr/local/bin/heron#/usr/bin/heron#g' docs/heron.service > "$assets/heron.service"

version=()
[ -n "${DEB_VERSION:-}" ] && version=(--deb-version "$DEB_VERSION")
# cargo-deb warns that assets outside target/release are not built: they
# are made above. Its messages are kept in the log, shown on failure.
if ! deb="$(cargo deb -p heron --no-build --no-strip "${version[@]}" --output "$target_dir/debian/" 2>"$assets/cargo-deb.log" | tail -n 1)"; then
    cat "$assets/cargo-deb.log" >&2
    exit 1
fi
cp "$assets/heron.debug" "${deb%.deb}.debug"
echo "$deb"
