//! `heron man DIR`: the manual pages. Each command's page is made from its
//! clap definition (name, synopsis, description, options), followed by the
//! sections an operator looks for that clap has no place for: EXIT STATUS,
//! FILES and EXAMPLES. heron.toml(5) describes the configuration file.

use std::io::Write;
use std::path::Path;

use clap_mangen::Man;

/// Writes heron.1, a page per subcommand (heron-serve.1, heron-ctl-status.1,
/// ...) and heron.toml.5 into `dir`; heron.toml.5 into `man5` beside it
/// when `dir` is a `man1` folder, where `man 5 heron.toml` looks.
pub fn write_pages(cmd: clap::Command, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    cmd.build();
    write_command(cmd, dir)?;
    let section_5 = match (dir.file_name(), dir.parent()) {
        (Some(name), Some(parent)) if name == "man1" => parent.join("man5"),
        _ => dir.to_path_buf(),
    };
    std::fs::create_dir_all(&section_5)?;
    std::fs::write(section_5.join("heron.toml.5"), CONFIG_PAGE)
}

fn write_command(cmd: clap::Command, dir: &Path) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        write_command(sub, dir)?;
    }
    let name = cmd
        .get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string();
    let man = Man::new(cmd);
    let mut page = Vec::new();
    man.render(&mut page)?;
    page.extend_from_slice(extra_sections(&name).as_bytes());
    std::fs::File::create(dir.join(man.get_filename()))?.write_all(&page)
}

/// EXIT STATUS, FILES and EXAMPLES of the page of the command `name`
/// (`heron`, `heron-serve`, `heron-ctl-status`, ...), in roff.
fn extra_sections(name: &str) -> String {
    let exit = match name {
        n if n == "heron-ctl" || n.starts_with("heron-ctl-") || n == "heron-reload" => CTL_EXIT,
        "heron-check-zone" | "heron-check-config" => CHECK_EXIT,
        "heron-doctor" => DOCTOR_EXIT,
        "heron-import" => IMPORT_EXIT,
        "heron-compare" => COMPARE_EXIT,
        _ => PLAIN_EXIT,
    };
    let examples = match name {
        "heron" | "heron-serve" => SERVE_EXAMPLES,
        n if n == "heron-ctl" || n.starts_with("heron-ctl-") => CTL_EXAMPLES,
        "heron-keygen" => KEYGEN_EXAMPLES,
        "heron-check-config" | "heron-check-zone" => CHECK_EXAMPLES,
        "heron-import" => IMPORT_EXAMPLES,
        "heron-compare" => COMPARE_EXAMPLES,
        _ => "",
    };
    format!("{exit}{FILES}{examples}.SH SEE ALSO\nheron.toml(5), heron(1)\n")
}

const PLAIN_EXIT: &str = ".SH EXIT STATUS\n.TP\n0\ndone\n.TP\n1\nfailed (the reason is printed)\n.TP\n2\na usage error\n";

const CHECK_EXIT: &str = ".SH EXIT STATUS\n.TP\n0\nno errors (warnings may be printed)\n\
    .TP\n1\nerrors, each printed with its file and line\n.TP\n2\na usage error\n";

const DOCTOR_EXIT: &str = ".SH EXIT STATUS\n.TP\n0\nnothing to fix (notes may be printed)\n\
    .TP\n1\nsomething to fix, each printed with what to do\n.TP\n2\na usage error, or a configuration that cannot be read\n";

const IMPORT_EXIT: &str = ".SH EXIT STATUS\n.TP\n0\nthe file was written; settings that could not be translated \
    are listed on stderr, each with its file and line, and are warnings\n\
    .TP\n1\nan error: the configuration could not be read (its file and line are printed), \
    the output exists (see \\-\\-force), the file written does not load, or what it says could not be \
    written on stderr (a full disk, a reader that went away; the file is not written when its listing \
    could not be)\n.TP\n2\na usage error\n";

const IMPORT_EXAMPLES: &str = ".SH EXAMPLES\n.nf\nheron import \\-\\-from nsd /etc/nsd/nsd.conf \\-o /etc/heron/heron.toml\n\
    heron import \\-\\-from knot /etc/knot/knot.conf \\-\\-listen 127.0.0.1:5300    # beside the old server\n\
    heron import \\-\\-from bind /etc/bind/named.conf 2> not\\-translated.txt\n\
    heron check\\-config heron.toml\n.fi\n";
const COMPARE_EXIT: &str = ".SH EXIT STATUS\n.TP\n0\nno differences (tolerated ones may be listed)\n\
    .TP\n1\ndifferences, grouped by kind, each with an example\n\
    .TP\n2\nan error: a usage error, a zone that does not load, a server (the old one, or the Heron \
    \\-\\-server names) that answered none of the first queries, or output that could not be written \
    (a full disk, a reader that went away)\n";

const COMPARE_EXAMPLES: &str = ".SH EXAMPLES\n.nf\nheron compare \\-\\-against 127.0.0.1:53 \\-\\-config /etc/heron/heron.toml\n\
    heron compare \\-\\-against 192.0.2.53 \\-\\-zone example.com=example.com.zone \\-\\-server 127.0.0.1:5300\n.fi\n";

const CTL_EXIT: &str = ".SH EXIT STATUS\n.TP\n0\ndone\n\
    .TP\n1\ntried and failed, with the reason (a zone that did not load, no primary that answered)\n\
    .TP\n2\na usage error\n\
    .TP\n3\nno server answered within \\-\\-timeout (none at the control socket, or no socket there)\n\
    .TP\n4\nrefused without trying (an unknown command or zone, a zone of the other kind, the socket busy)\n";

const FILES: &str = ".SH FILES\n.TP\n/etc/heron/heron.toml\nthe configuration (heron.toml(5))\n\
    .TP\n/run/heron/control.sock\nthe control socket under the shipped unit (heron ctl also takes $HERON_CONTROL)\n\
    .TP\n/var/lib/heron\nkept copies of secondary zones and journals (*.jnl)\n\
    .TP\n/var/log/heron\na dnstap file, if configured\n";

const SERVE_EXAMPLES: &str = ".SH EXAMPLES\n.nf\nheron serve \\-\\-listen 127.0.0.1:5300 \\-\\-zone example.test=example.test.zone\n\
    heron serve \\-\\-config /etc/heron/heron.toml\nkill \\-HUP $(pidof heron)    # reload zones and configuration\n.fi\n";

const CTL_EXAMPLES: &str = ".SH EXAMPLES\n.nf\nheron ctl status\nheron ctl zone\\-status example.com\n\
    heron ctl \\-c /etc/heron/heron.toml retransfer example.net \\-\\-force\nheron ctl stats \\-\\-json\n.fi\n";

const KEYGEN_EXAMPLES: &str = ".SH EXAMPLES\n.nf\nheron keygen xfr.example.com >> /etc/heron/heron.toml\n\
    heron keygen xfr.example.com \\-\\-format all    # the same key for Knot, BIND and NSD too\n.fi\n";

const CHECK_EXAMPLES: &str = ".SH EXAMPLES\n.nf\nheron check\\-config /etc/heron/heron.toml\nheron check\\-zone example.com.zone example.com\n.fi\n";

/// heron.toml(5): what each section is for, with the file's full
/// reference in the documentation.
const CONFIG_PAGE: &str = r#".TH heron.toml 5 "" "heron" "File Formats"
.SH NAME
heron.toml \- configuration of the Heron authoritative DNS server
.SH SYNOPSIS
/etc/heron/heron.toml
.SH DESCRIPTION
A TOML file read by \fBheron serve \-\-config\fR, checked by \fBheron check\-config\fR.
Relative paths are taken from the file's folder. Unknown keys are errors.
A reload (SIGHUP, \fBheron reload\fR, \fBheron ctl reconfigure\fR) applies zones,
transfer settings, TSIG keys, catalogs and log levels at once; listeners,
workers and the other parts it names wait for a restart.
The full reference is configuration.md in /usr/share/doc/heron.
.SH SECTIONS
.TP
[server]
listen addresses, workers, cpu\-affinity, control socket, user and group to become, nsid, allow\-query, blackhole
.TP
[tcp], [tls]
connection limits and timeouts; DNS over TLS listeners, certificate and key
.TP
[xdp]
the AF_XDP fast path for UDP on an interface
.TP
[rrl], [cookies]
response rate limiting; DNS cookies (RFC 7873, 9018)
.TP
[dnstap]
the query log to a Frame Streams socket or a file
.TP
[metrics]
the Prometheus endpoint and who may scrape it (allow)
.TP
[log]
text or JSON, levels per part of the server
.TP
[secondary], [xfr]
refresh bounds, transfer concurrency and limits; source addresses of outgoing queries
.TP
[[key]]
a TSIG key: name, algorithm, secret (\fBheron keygen\fR makes one)
.TP
[[zone]], [[zone\-group]]
a zone from a file (a primary), or kept from its primaries (a secondary); allow\-transfer, allow\-notify, notify;
dynamic update (allow\-update, and allow\-update\-forwarding on a secondary); signing (dnssec\-policy);
a generated catalog (catalog = "generate")
.TP
[[dnssec\-policy]]
how Heron signs a zone itself: algorithm, keys and their lifetimes, signature validity and refresh, NSEC or NSEC3,
the parent's DS (\fBheron keymgr\fR and \fBheron ctl keys\fR manage the keys)
.TP
[[catalog]]
a catalog zone (RFC 9432) whose members become secondary zones
.SH EXAMPLES
.nf
[server]
listen = ["192.0.2.53:53", "[2001:db8::53]:53"]
control = "/run/heron/control.sock"

[[key]]
name = "xfr.example.com"
secret = "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"

[[zone]]
origin = "example.com"
file = "/var/lib/heron/zones/example.com.zone"
allow\-transfer = ["198.51.100.2 key xfr.example.com"]
notify = ["198.51.100.2 key xfr.example.com"]
.fi
.SH SEE ALSO
heron(1), heron\-serve(1), heron\-check\-config(1)
"#;
