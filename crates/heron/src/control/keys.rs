//! `heron ctl keys ZONE`, `heron ctl roll ZONE KEY` and `heron ctl
//! ds-seen ZONE`: a signed zone's DNSSEC keys with their RFC 7583 states
//! and next event, a rollover asked by hand, and the operator's word that
//! the parent's DS RRset changed as the zone's CDS asks (for parents that
//! cannot be queried).

use std::path::PathBuf;

use heron_dnssec::rollover::State;
use heron_proto::Name;
use serde_json::{Value, json};

use crate::control::commands::Controller;
use crate::control::socket::Response;
use crate::plan::key_state;
use crate::plan::rollover::current_policy;
use crate::runtime::rollover;

fn state_name(state: State) -> &'static str {
    match state {
        State::Hidden => "hidden",
        State::Rumoured => "rumoured",
        State::Omnipresent => "omnipresent",
        State::Unretentive => "unretentive",
    }
}

impl Controller {
    /// Each key of `zone` as its state file records it, with its next
    /// event under the zone's configured policy.
    pub(crate) async fn keys(&self, zone: &Name) -> Response {
        let (found, failed) = {
            let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
            let failed = files.last_error(&zone.to_lowercase()).map(String::from);
            (rollover::policy_of(&files, zone), failed)
        };
        let Some((policy, dir)) = found else {
            return Response::refused(format!("{zone} is not a zone this server signs"));
        };
        let text = key_state::zone_text(zone);
        let read = tokio::task::spawn_blocking(move || key_state::read_state(&dir, &text)).await;
        let state = match read {
            Ok(Ok(Some(state))) => state,
            Ok(Ok(None)) => return Response::error(format!("{zone} has no keys yet")),
            Ok(Err(e)) => return Response::error(e),
            Err(e) => return Response::error(e.to_string()),
        };
        let now = heron_proto::time::unix_now();
        let policy_now = current_policy(&policy, &state, now);
        let wanted = policy_now.algorithm;
        let machine = heron_dnssec::rollover::Rollover::new(policy_now, state.keys.clone());
        use heron_dnssec::rollover::Goal;
        let succeeded = |key: &heron_dnssec::rollover::Key| {
            (state.keys.iter())
                .any(|k| k.id != key.id && k.role == key.role && k.goal == Goal::Omnipresent)
        };
        let rows: Vec<Value> = (state.keys.iter().zip(machine.status(now)))
            .map(|(key, status)| {
                json!({
                    "id": key.id,
                    "tag": status.tag,
                    "algorithm": status.algorithm,
                    "role": format!("{:?}", status.role).to_ascii_lowercase(),
                    "goal": format!("{:?}", status.goal).to_ascii_lowercase(),
                    "dnskey": state_name(status.dnskey),
                    "rrsig": status.zone_rrsig.map(state_name),
                    "ds": status.ds.map(state_name),
                    "next": status.next.what(),
                    "next_at": status.next.at(),
                    // Asked by `heron ctl roll`, not begun yet (black-box
                    // finding BP-2: nothing showed it was taken).
                    // Until the rollover begins: a successor of its role
                    // coming in (regression hunt BS-7).
                    "roll_requested": key.roll_requested && !succeeded(key),
                })
            })
            .collect();
        let waiting = (rollover::statuses().lock())
            .unwrap_or_else(|e| e.into_inner())
            .get(&key_state::zone_text(zone))
            .and_then(|s| s.waiting.clone());
        let mut message = match &waiting {
            Some(w) => format!("{} keys; {w}", rows.len()),
            None => format!("{} keys", rows.len()),
        };
        // A policy's new algorithm waits for the steps under way (black-box
        // finding BP-2: nothing showed it was taken).
        let taken_up =
            (state.keys.iter()).any(|k| k.goal == Goal::Omnipresent && k.algorithm == wanted);
        // (A zone going insecure has no key in use, and wants none.)
        if !state.keys.is_empty() && !taken_up && !policy.insecure {
            message.push_str(&format!(
                "; the policy's algorithm is {wanted}: a rollover to it begins once the steps under way are done"
            ));
        }
        // A step that cannot be signed does not happen: its time passes.
        if let Some(why) = failed {
            message.push_str(&format!(
                "; the last signing failed, so the next event waits: {why}"
            ));
        }
        Response::ok(message, Value::Array(rows))
    }

    /// Starts the rollover of the key `key` names (or of every key of a
    /// role): the rollover driver signs the zone's next step at once.
    pub(crate) async fn roll(&self, zone: &Name, key: String) -> Response {
        let policy = {
            let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
            rollover::policy_of(&files, zone).map(|(policy, _)| policy)
        };
        // A rollover makes a key of the policy's algorithm: one Heron
        // cannot make (imported RSA) would stop the zone's signing at its
        // first step (black-box finding).
        if let Some(policy) = policy.filter(|p| !p.algorithm.can_generate()) {
            return Response::error(format!(
                "{zone}: Heron generates no {} keys to roll to; to replace the imported keys, \
                 roll to another algorithm by changing the policy's `algorithm`",
                policy.algorithm
            ));
        }
        let started = self
            .edit_keys(zone, move |dir, origin| rollover::roll(dir, origin, &key))
            .await;
        if !started.ok {
            return started;
        }
        self.step_now(zone, started).await
    }

    /// Signs `zone` again from the version served, as the rollover driver
    /// would next, so that what `said` announces is done before it is said,
    /// or the step's failure is answered instead (regression hunt BC-3:
    /// "its successor is made and published now", exit 0, for a step
    /// that failed).
    async fn step_now(&self, zone: &Name, said: Response) -> Response {
        let selection = crate::runtime::Selection {
            zones: Some(std::iter::once(zone.to_lowercase()).collect()),
            force: true,
            from_served: true,
        };
        let (outcome, _) = crate::runtime::reload(
            &self.catalog,
            &self.files,
            &self.transfers,
            "heron ctl roll",
            selection,
        )
        .await;
        match outcome.is_ok() {
            true => said,
            false => Response {
                errors: outcome.errors,
                ..Response::error(format!(
                    "{zone}: the rollover is recorded, but the step that starts it failed \
                     (nothing made or published yet; it is tried again)"
                ))
            },
        }
    }

    /// Records that the parent now publishes (or no longer publishes) the
    /// DS the zone's CDS asks for; the zone's keys move on at once.
    pub(crate) async fn ds_seen(&self, zone: &Name) -> Response {
        self.edit_keys(zone, rollover::ds_seen).await
    }

    /// Runs `edit` on the key directory of `zone`, a zone this server
    /// signs, off the runtime; what it says is the answer.
    async fn edit_keys(
        &self,
        zone: &Name,
        edit: impl FnOnce(PathBuf, &Name) -> Result<String, String> + Send + 'static,
    ) -> Response {
        let found = {
            let files = self.files.lock().unwrap_or_else(|e| e.into_inner());
            rollover::policy_of(&files, zone)
        };
        let Some((_, dir)) = found else {
            return Response::refused(format!("{zone} is not a zone this server signs"));
        };
        let origin = zone.clone();
        match tokio::task::spawn_blocking(move || edit(dir, &origin)).await {
            Ok(Ok(said)) => Response::ok(said, json!({ "zone": zone.to_string() })),
            Ok(Err(e)) => Response::error(e),
            Err(e) => Response::error(e.to_string()),
        }
    }
}
