#!/usr/bin/env bash
# Fails when a module of heron-zone, heron-xfr or the heron binary imports
# one above it. The layers, lowest first, are listed once below (modules
# joined by commas share a layer); a module may use `crate::` paths into its
# own layer and those beneath it. Leaf helpers may be used by anyone. A
# name re-exported at the crate root (`pub use zone::Zone;` in lib.rs)
# counts as the layer it comes from. A `crate::` name the script cannot
# place is an error too, so a new module has to be added here on purpose.
# Comments are ignored; `super::` paths are not read (they stay inside a
# layer's folder).
set -euo pipefail
cd "$(dirname "$0")/.."

check() {
SRC=$1 LAYERS=$2 LEAVES=$3
perl -e '
    use strict;
    my ($src, $layers, $leaves) = @ARGV;
    my @order = split " ", $layers;
    my %rank;
    for my $i (0 .. $#order) {
        $rank{$_} = $i for split ",", $order[$i];
    }
    my %leaf = map { $_ => 1 } split " ", $leaves;

    sub code_of {
        my ($path) = @_;
        open my $f, "<", $path or die "$path: $!\n";
        local $/;
        my $text = <$f>;
        $text =~ s{//[^\n]*}{}g;
        return $text;
    }

    # Root re-exports: `pub use LAYER::...;` places every name it brings in.
    my %exported;
    my $root = -e "$src/lib.rs" ? "$src/lib.rs" : "$src/main.rs";
    my $lib = code_of($root);
    while ($lib =~ /pub\s+use\s+(\w+)::([^;]*);/g) {
        my ($layer, $rest) = ($1, $2);
        next unless exists $rank{$layer};
        for my $name ($rest =~ /\b(\w+)\b(?!::)/g) {
            $exported{$name} = $layer unless $name eq "self";
        }
    }

    sub layer_of {
        my ($name) = @_;
        return $name if exists $rank{$name};
        return $exported{$name};
    }

    my $bad = 0;
    my @files = split "\n", `find $src -name "*.rs" ! -path "$root" | sort`;
    for my $path (@files) {
        my ($top) = $path =~ m{^\Q$src\E/(\w+)};
        next if $leaf{$top};
        my $own = $rank{$top};
        if (!defined $own) {
            print STDERR "$path: module `$top` is in no layer (add it to LAYERS or LEAVES)\n";
            $bad = 1;
            next;
        }
        my $code = code_of($path);
        my @used;
        while ($code =~ /\bcrate::(\{[^;]*?\}|\w+)/g) {
            my $group = $1;
            if ($group =~ /^\{/) {
                push @used, $group =~ /[{,]\s*(\w+)/g;
            } else {
                push @used, $group;
            }
        }
        for my $name (@used) {
            next if $leaf{$name};
            my $layer = layer_of($name);
            if (!defined $layer) {
                print STDERR "$path: cannot place crate::$name in a layer\n";
                $bad = 1;
            } elsif ($rank{$layer} > $own) {
                print STDERR "$path: `$top` imports crate::$name from `$layer`, a layer above it ($layers)\n";
                $bad = 1;
            }
        }
    }
    exit $bad;
' "$SRC" "$LAYERS" "$LEAVES" || {
    echo "$SRC: an import goes up the layers (order: $LAYERS)" >&2
    exit 1
}
echo "$SRC layers one-way: $LAYERS"
}

check crates/heron-zone/src "zonefile zone catalog answer" "prefetch cores"
# heron-xfr: the I/O-free timers below the primary and secondary drivers
# that run them; the leaves are primitives every layer may use.
check crates/heron-xfr/src "update journal catalog_zone timers primary secondary" \
    "serial unix_seconds growth disk origin_index stats keys acl"

# The binary: what the configuration says, what it means, the running
# server, what operators drive it with, and the entry points above all.
check crates/heron/src "config plan runtime control serve,check,doctor,keygen,keymgr,man,completions,import,compare" \
    "background memory notify logging privileges process_start stdout"

# No two files of these crates import each other, directly or round a
# circle (a folder's mod.rs and its own parts excepted).
python3 scripts/check-import-cycles.py crates/heron-proto/src crates/heron-zone/src \
    crates/heron-xfr/src crates/heron-server/src crates/heron-dnssec/src crates/heron/src
