//! Shell completions: clap's scripts, and for bash and fish the names of
//! the zones after the `heron ctl` commands that take zones
//! ([`ZONE_COMMANDS`]). The scripts ask `heron complete-zones` (hidden),
//! which asks the running server over its control socket and, if none
//! answers within a second, reads the zones of the configuration file.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap_complete::Shell;

use crate::control::ctl::ControlArgs;
use crate::control::socket::{self as control, Request};

/// Where a configuration is looked for when `--config` names none.
const DEFAULT_CONFIG: &str = "/etc/heron/heron.toml";
/// How long a completion waits for the server.
const ASK_WITHIN: Duration = Duration::from_secs(1);
/// The `heron ctl` commands whose arguments are zones.
const ZONE_COMMANDS: &str =
    "zone-status reload retransfer refresh notify freeze thaw flush keys roll ds-seen";

/// Prints the completion script for `shell`, with zone names for bash and
/// fish.
pub fn print(shell: Shell, mut command: clap::Command) -> ExitCode {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "heron", &mut script);
    let mut script = without_hidden(&String::from_utf8_lossy(&script), shell);
    match shell {
        Shell::Bash => script.push_str(&BASH.replace("ZONE_COMMANDS", ZONE_COMMANDS)),
        Shell::Fish => script.push_str(&FISH.replace("ZONE_COMMANDS", ZONE_COMMANDS)),
        _ => {}
    }
    out!("{script}");
    ExitCode::SUCCESS
}

/// The hidden `complete-zones` taken out of what `script` offers as a
/// command: clap's scripts offer hidden commands too (black-box finding
/// DE-11). Where it is typed out it still completes.
fn without_hidden(script: &str, shell: Shell) -> String {
    let lines = script.lines().filter_map(|line| match shell {
        Shell::Fish if line.contains("-a \"complete-zones\"") => None,
        Shell::Bash if line.trim_start().starts_with("opts=\"") => {
            Some(line.replace(" complete-zones", ""))
        }
        _ => Some(line.to_string()),
    });
    lines.map(|line| line + "\n").collect()
}

/// `heron complete-zones`: the zones the server (else the configuration)
/// has, one a line. Never fails: a completion offers nothing instead.
pub fn zones(target: &ControlArgs) -> ExitCode {
    let mut zones = target
        .socket()
        .ok()
        .and_then(|socket| zones_served(&socket))
        .or_else(|| {
            let config = target
                .config
                .as_deref()
                .unwrap_or(Path::new(DEFAULT_CONFIG));
            zones_configured(config)
        })
        .unwrap_or_default();
    zones.sort();
    zones.dedup();
    zones.iter().for_each(|z| outln!("{z}"));
    ExitCode::SUCCESS
}

/// The zones of the server at `socket`, if it answers in time.
fn zones_served(socket: &Path) -> Option<Vec<String>> {
    let response = control::ask(socket, &Request::new("zone-status"), ASK_WITHIN).ok()?;
    let rows = response.data.as_array()?;
    Some(
        rows.iter()
            .filter_map(|row| row["zone"].as_str().map(str::to_string))
            .collect(),
    )
}

/// The zones `config` names, primary and secondary, if it reads.
fn zones_configured(config: &Path) -> Option<Vec<String>> {
    let settings = crate::config::load(config).ok()?;
    let primaries = settings.zones.iter().map(|z| z.origin.to_string());
    let secondaries = settings.secondaries.iter().map(|z| z.origin.to_string());
    Some(primaries.chain(secondaries).collect())
}

/// Wraps clap's `_heron`: after a zone command of `heron ctl`, zone names.
const BASH: &str = r#"
# Zone names after `heron ctl ZONE_COMMANDS`, from the running server
# (the -c/--config or --control given on the line) or the configuration.
_heron_zones() {
    local i args=()
    for ((i = 1; i < COMP_CWORD - 1; i++)); do
        case "${COMP_WORDS[i]}" in
            -c|--config) args+=(--config "${COMP_WORDS[i+1]}") ;;
            --control|--socket) args+=(--control "${COMP_WORDS[i+1]}") ;;
        esac
    done
    "${COMP_WORDS[0]}" complete-zones "${args[@]}" 2>/dev/null
}

_heron_with_zones() {
    local cur="${COMP_WORDS[COMP_CWORD]}" i
    if [[ "${COMP_WORDS[1]}" == ctl && "$cur" != -* ]]; then
        for ((i = 2; i < COMP_CWORD; i++)); do
            case " ZONE_COMMANDS " in
                *" ${COMP_WORDS[i]} "*)
                    COMPREPLY=( $(compgen -W "$(_heron_zones)" -- "$cur") )
                    return 0
                    ;;
            esac
        done
    fi
    _heron "$@"
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _heron_with_zones -o nosort -o bashdefault -o default heron
else
    complete -F _heron_with_zones -o bashdefault -o default heron
fi
"#;

/// Zone names after `heron ctl` and a zone command.
const FISH: &str = r#"
# Zone names after `heron ctl ZONE_COMMANDS`, from the running server
# (the -c/--config or --control given on the line) or the configuration.
function __heron_zones
    set -l words (commandline -opc)
    set -l args
    for i in (seq 1 (math (count $words) - 1))
        switch $words[$i]
            case -c --config
                set args $args --config $words[(math $i + 1)]
            case --control --socket
                set args $args --control $words[(math $i + 1)]
        end
    end
    heron complete-zones $args 2>/dev/null
end
complete -c heron -n "__fish_seen_subcommand_from ctl; and __fish_seen_subcommand_from ZONE_COMMANDS" -f -a "(__heron_zones)"
"#;
