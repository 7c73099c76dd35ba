#!/usr/bin/env bash
# Tests the Debian package: builds it (scripts/build-deb.sh, reusing the
# release build), runs lintian (no errors allowed), then with dpkg into a
# fresh root directory (dpkg --root, maintainer scripts run chrootless with
# $DPKG_ROOT set): install, upgrade to a newer version over it (a local
# edit of the conffile kept), `heron check-config /etc/heron/heron.toml`
# on the installed files, remove, purge.
#
# Exercised: the package's contents, its conffiles, the maintainer scripts'
# $DPKG_ROOT paths (the heron user and group added with useradd --prefix,
# /etc/heron given to the group, the unit enabled by deb-systemd-helper,
# all undone on purge), dpkg's upgrade and conffile handling, and, as root,
# the installed binary run inside the root with chroot.
# Not exercised: the host paths of the scripts (adduser/deluser, systemctl,
# the service started and stopped by deb-systemd-invoke), the unit under
# systemd, and dependency resolution (the empty root has no libc6 or
# adduser: --force-depends).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-packages.sh lintian dpkg-dev binutils passwd

fail() { echo "test-deb: FAIL: $*" >&2; exit 1; }
check() { local what="$1"; shift; "$@" || fail "$what"; }

work="$(mktemp -d /tmp/heron-deb-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# Each copied away at once: cargo-deb replaces the package's older files.
built="$(scripts/build-deb.sh | tail -n 1)"
[ -f "${built%.deb}.debug" ] || fail "no separate debug information beside $built"
cp "$built" "$work/" && deb="$work/$(basename "$built")"
built="$(DEB_VERSION=0.1.0-2 scripts/build-deb.sh --no-build | tail -n 1)"
cp "$built" "$work/" && newer="$work/$(basename "$built")"
[ -f "$deb" ] && [ -f "$newer" ] && [ "$deb" != "$newer" ] || fail "no packages built ($deb, $newer)"
echo "built $deb and $newer"

echo "lintian:"
lintian --fail-on error --tag-display-limit 0 "$deb" || fail "lintian reports errors"

# The package's contents.
contents="$(dpkg-deb --contents "$deb")"
for path in ./usr/bin/heron ./etc/heron/heron.toml ./etc/heron/heron.test.zone \
    ./lib/systemd/system/heron.service ./usr/share/man/man1/heron.1.gz \
    ./usr/share/man/man1/heron-compare.1.gz ./usr/share/man/man5/heron.toml.5.gz \
    ./usr/share/bash-completion/completions/heron ./usr/share/zsh/vendor-completions/_heron \
    ./usr/share/fish/vendor_completions.d/heron.fish ./usr/share/doc/heron/copyright \
    ./usr/share/doc/heron/examples/dnstap.toml ./usr/share/doc/heron/examples/metrics.toml \
    ./usr/share/doc/heron/examples/heron-alerts.yml ./usr/share/doc/heron/configuration.md \
    ./usr/share/doc/heron/migrating.md ./usr/share/doc/heron/heron-xdp.conf; do
    grep -q " $path\$" <<<"$contents" || fail "$path missing from the package"
done
conffiles="$(dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./conffiles)"
check "conffiles: $conffiles" test "$(sort <<<"$conffiles")" = "$(printf '/etc/heron/heron.test.zone\n/etc/heron/heron.toml')"

# A fresh root: dpkg's database, and the account files useradd edits.
root="$work/root"
mkdir -p "$root"/var/lib/dpkg/{info,updates,triggers} "$root"/var/log "$root"/etc
touch "$root"/var/lib/dpkg/{status,available}
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$root/etc/passwd"
printf 'root:x:0:\n' > "$root/etc/group"
printf 'root:*::0:99999:7:::\n' > "$root/etc/shadow"
printf 'root:*::\n' > "$root/etc/gshadow"
as_user=()
[ "$(id -u)" -eq 0 ] || as_user=(fakeroot)
dpkg_root() {
    "${as_user[@]}" dpkg --root="$root" --force-script-chrootless --force-depends \
        --force-not-root --log=/dev/null "$@"
}
status() { dpkg --root="$root" -s heron 2>/dev/null | sed -n 's/^Status: //p'; }

echo "install:"
dpkg_root -i "$deb"
check "installed: $(status)" test "$(status)" = "install ok installed"
check "the heron user" grep -q '^heron:x:[0-9]*:[0-9]*:Heron DNS server:/var/lib/heron:/usr/sbin/nologin$' "$root/etc/passwd"
gid="$(awk -F: '$1 == "heron" { print $3 }' "$root/etc/group")"
check "the heron group" test -n "$gid"
check "/etc/heron for the heron group" test "$(stat -c '%a %g' "$root/etc/heron")" = "750 $gid"
check "the unit enabled" test -L "$root/etc/systemd/system/multi-user.target.wants/heron.service"
check "the unit runs /usr/bin/heron" grep -q '^ExecStart=/usr/bin/heron serve --config /etc/heron/heron.toml$' "$root/lib/systemd/system/heron.service"
check "a stripped binary with a debuglink" sh -c "objdump -h '$root/usr/bin/heron' | grep -q gnu_debuglink && ! objdump -h '$root/usr/bin/heron' | grep -q debug_info"

echo "check-config on the installed files:"
"$root/usr/bin/heron" check-config "$root/etc/heron/heron.toml"
if [ "$(id -u)" -eq 0 ]; then
    # The same inside the root, at the paths the unit uses: the binary's
    # shared libraries copied in (the root holds no libc6).
    for lib in $(ldd "$root/usr/bin/heron" | grep -o '/[^ ]*'); do
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
    chroot "$root" /usr/bin/heron check-config /etc/heron/heron.toml
fi

echo "upgrade:"
echo "# a local edit" >> "$root/etc/heron/heron.toml"
dpkg_root -i "$newer"
check "upgraded: $(status)" test "$(status)" = "install ok installed"
check "version 0.1.0-2" test "$(dpkg --root="$root" -s heron | sed -n 's/^Version: //p')" = "0.1.0-2"
check "the local edit kept" grep -q '^# a local edit$' "$root/etc/heron/heron.toml"
check "one heron user" test "$(grep -c '^heron:' "$root/etc/passwd")" = 1
"$root/usr/bin/heron" check-config "$root/etc/heron/heron.toml"

echo "remove:"
dpkg_root -r heron
check "removed: $(status)" test "$(status)" = "deinstall ok config-files"
check "the binary gone" test ! -e "$root/usr/bin/heron"
check "the conffile kept" test -f "$root/etc/heron/heron.toml"
check "the user kept" grep -q '^heron:' "$root/etc/passwd"

echo "purge:"
# An operator's key in the documented place: no purge may take it.
mkdir -p "$root/var/lib/heron/keys"
echo "Private-key-format: v1.3" > "$root/var/lib/heron/keys/Kexample.com.+013+12345.private"
dpkg_root -P heron
check "purged: $(status)" test -z "$(status)"
check "the operator's key kept" test -f "$root/var/lib/heron/keys/Kexample.com.+013+12345.private"
# Its owner's number is not freed for another user to take.
check "the user kept with the key" grep -q '^heron:' "$root/etc/passwd"
check "the group kept with the key" grep -q '^heron:' "$root/etc/group"
rm -r "$root/var/lib/heron"
check "the conffiles gone" test ! -e "$root/etc/heron"
echo "install and purge again, nothing left in /var/lib/heron:"
dpkg_root -i "$deb"
check "one heron user after a reinstall" test "$(grep -c '^heron:' "$root/etc/passwd")" = 1
dpkg_root -P heron
check "the user gone" sh -c "! grep -q '^heron:' '$root/etc/passwd'"
check "the group gone" sh -c "! grep -q '^heron:' '$root/etc/group'"
check "the unit's links gone" test ! -e "$root/etc/systemd/system/multi-user.target.wants/heron.service"
leftover="$(cd "$root" && find . -path ./var/lib/dpkg -prune -o -path ./etc -prune -o -path ./var/log -prune -o -path ./lib/x86_64-linux-gnu -prune -o -path ./lib64 -prune -o -path ./usr/lib -prune -o -type f -print)"
check "files left after purge: $leftover" test -z "$leftover"
echo "test-deb: OK"
