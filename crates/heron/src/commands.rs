//! What the control socket's commands do in a running server: each one
//! is done (or has failed) before its response is sent.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use heron_proto::Name;
use heron_server::SharedCatalog;
use serde_json::{Value, json};

use crate::control::{Request, Response};
use crate::reload::ZoneFiles;
use crate::serve::{Selection, Transfers, reload};

/// The commands this server answers, for the error that names them.
const KNOWN: &str = "status, zone-status, reload, stop";

/// What the commands see of the running server.
pub(crate) struct Controller {
    pub(crate) catalog: SharedCatalog,
    pub(crate) files: Arc<Mutex<ZoneFiles>>,
    pub(crate) transfers: Arc<Transfers>,
    /// The secondary zones, lower-cased.
    pub(crate) secondaries: HashSet<Name>,
    pub(crate) listeners: Vec<SocketAddr>,
    pub(crate) tls_listeners: Vec<SocketAddr>,
    pub(crate) workers: usize,
    /// Woken by `stop`: the server shuts down as on SIGTERM.
    pub(crate) stop: Arc<tokio::sync::Notify>,
}

impl Controller {
    pub(crate) async fn handle(&self, request: Request) -> Response {
        let zones = match parse_zones(&request.zones) {
            Ok(zones) => zones,
            Err(e) => return Response::error(e),
        };
        match request.command.as_str() {
            "status" => self.status(),
            "zone-status" => self.zone_status(&zones),
            "reload" => self.reload(zones, request.force).await,
            "stop" => {
                tracing::info!("control socket: stop asked");
                self.stop.notify_one();
                let pid = std::process::id();
                Response::ok(format!("stopping (pid {pid})"), json!({ "pid": pid }))
            }
            other => Response::error(format!("unknown command '{other}'; known: {KNOWN}")),
        }
    }

    fn status(&self) -> Response {
        let catalog = self.catalog.load();
        let secondary = self.secondaries.len();
        let served_secondaries = (self.secondaries.iter())
            .filter(|o| catalog.get(o).is_some())
            .count();
        let data = json!({
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "uptime_seconds": crate::started().elapsed().as_secs(),
            "zones": {
                "primary": catalog.len() - served_secondaries,
                "secondary": secondary,
                "secondary_served": served_secondaries,
            },
            "listeners": self.listeners.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "workers": self.workers,
            "tls": {
                "enabled": !self.tls_listeners.is_empty(),
                "listeners": self.tls_listeners.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            },
        });
        Response::ok("running", data)
    }

    /// Each zone asked (all when none), or an error naming those unknown.
    fn zone_status(&self, asked: &[Name]) -> Response {
        let catalog = self.catalog.load();
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let mut origins: Vec<Name> = if asked.is_empty() {
            let served = catalog.zones().map(|z| z.origin().to_lowercase());
            let mut all: HashSet<Name> = served.collect();
            all.extend(self.secondaries.iter().cloned());
            all.into_iter().collect()
        } else {
            asked.to_vec()
        };
        origins.sort_by_key(|o| o.to_string());
        let mut rows = Vec::new();
        let mut unknown = Vec::new();
        for origin in origins {
            let zone = catalog.get(&origin);
            let loaded = files.loaded_at(&origin);
            let secondary = self.secondaries.contains(&origin);
            if zone.is_none() && loaded.is_none() && !secondary {
                unknown.push(format!("unknown zone {origin}: not configured"));
                continue;
            }
            rows.push(json!({
                "zone": origin.to_string(),
                "role": if secondary { "secondary" } else { "primary" },
                "serial": zone.map(|z| z.serial()),
                "served": zone.is_some(),
                "loaded_at": loaded.flatten().map(unix_seconds),
            }));
        }
        if !unknown.is_empty() {
            return Response {
                errors: unknown,
                ..Response::error("some zones are not known")
            };
        }
        Response::ok(format!("{} zones", rows.len()), Value::Array(rows))
    }

    async fn reload(&self, zones: Vec<Name>, force: bool) -> Response {
        let selection = if zones.is_empty() {
            Selection { zones: None, force }
        } else {
            if let Err(errors) = self.reloadable(&zones) {
                return Response {
                    errors,
                    ..Response::error("nothing reloaded")
                };
            }
            Selection {
                zones: Some(zones.into_iter().collect()),
                force,
            }
        };
        let asked_by = "control socket";
        let (outcome, took) = reload(
            &self.catalog,
            &self.files,
            &self.transfers,
            asked_by,
            selection,
        )
        .await;
        let summary = format!("reloaded in {} ms: {}", took.as_millis(), outcome.summary());
        let data = json!({
            "loaded": outcome.loaded,
            "unchanged": outcome.unchanged,
            "failed": outcome.failed,
            "removed": outcome.removed,
            "milliseconds": took.as_millis() as u64,
        });
        Response {
            ok: outcome.is_ok(),
            errors: outcome.errors,
            ..Response::ok(summary, data)
        }
    }

    /// Every zone named has a file to read: not unknown, not a secondary.
    fn reloadable(&self, zones: &[Name]) -> Result<(), Vec<String>> {
        let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let errors: Vec<String> = zones
            .iter()
            .filter_map(|origin| {
                if self.secondaries.contains(origin) {
                    Some(format!(
                        "{origin} is a secondary zone: it has no file to reload"
                    ))
                } else if files.loaded_at(origin).is_none() {
                    Some(format!("unknown zone {origin}: not configured"))
                } else {
                    None
                }
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

/// The zone names of a request, lower-cased, or what is wrong with one.
fn parse_zones(names: &[String]) -> Result<Vec<Name>, String> {
    names
        .iter()
        .map(|n| {
            Name::parse(n)
                .map(|name| name.to_lowercase())
                .map_err(|e| format!("zone name '{n}': {e}"))
        })
        .collect()
}

fn unix_seconds(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
