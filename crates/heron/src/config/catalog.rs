//! `[[catalog]]`: catalog zones this server consumes (RFC 9432). The
//! catalog zone itself becomes a secondary zone like any other (kept,
//! refreshed, NOTIFYed); its member zones follow a template chosen by
//! their `group` property.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use heron_proto::Name;
use heron_proto::tsig::Key;
use heron_xfr::journal::file as journal_file;
use heron_xfr::primary::ZonePolicy;
use heron_xfr::secondary::kept_file::KeptFile;
use heron_xfr::secondary::refresh::SecondaryZone;
use serde::Deserialize;

use super::{ZoneOptions, zone_settings};

#[derive(Debug, Deserialize, Clone, Hash)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CatalogEntry {
    /// The catalog zone's name.
    pub zone: String,
    /// Where the catalog zone is kept (its members are read from it at
    /// start).
    pub file: PathBuf,
    /// Its primaries, "ADDRESS[:PORT] [key NAME] [tls [NAME]]".
    pub primaries: Vec<String>,
    /// Who may transfer the catalog zone itself from us.
    #[serde(default)]
    pub allow_transfer: Vec<String>,
    /// Who is told of each new version of the catalog zone (NOTIFY), as
    /// a secondary `[[zone]]`'s `notify`: consumers downstream learn of
    /// members added and removed at once, not at the catalog's refresh
    /// (black-box finding BF-4: there was no way to tell them).
    #[serde(default)]
    pub notify: Vec<String>,
    /// The folder member zones are kept in, one file each.
    pub members_dir: PathBuf,
    /// Members whose group has no template of its own (and those without
    /// a group) are rejected instead of following `[catalog.default]`.
    #[serde(default)]
    pub groups_only: bool,
    /// The template of members without a group of their own.
    #[serde(default)]
    pub default: TemplateEntry,
    /// Templates by the `group` property's value.
    #[serde(default)]
    pub group: BTreeMap<String, TemplateEntry>,
    /// The most member zones taken from the catalog: a version listing
    /// more is rejected (each member is a zone kept, refreshed and
    /// served, so the producer must not decide alone how many).
    #[serde(default = "default_max_members")]
    pub max_members: usize,
}

/// `max-members` unless set: well above the 100,000-member catalogs the
/// project measures, well below what would exhaust a server's memory.
pub const DEFAULT_MAX_MEMBERS: usize = 250_000;

fn default_max_members() -> usize {
    DEFAULT_MAX_MEMBERS
}

/// What a member zone is given. Unset primaries and folder are the
/// catalog's.
#[derive(Debug, Deserialize, Clone, Default, Hash)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TemplateEntry {
    pub primaries: Vec<String>,
    pub allow_transfer: Vec<String>,
    pub allow_notify: Vec<String>,
    pub notify: Vec<String>,
    pub members_dir: Option<PathBuf>,
    pub journal: Option<bool>,
}

/// A catalog to consume, resolved.
#[derive(Clone, Debug)]
pub struct CatalogConfig {
    pub zone: Name,
    pub default: Option<Template>,
    pub groups: BTreeMap<String, Template>,
    /// `max-members`.
    pub max_members: usize,
}

impl CatalogConfig {
    /// The default template and the groups'.
    pub fn templates_mut(&mut self) -> impl Iterator<Item = &mut Template> {
        self.default.iter_mut().chain(self.groups.values_mut())
    }
}

/// A member zone template, resolved.
#[derive(Clone, Debug)]
pub struct Template {
    pub primaries: heron_xfr::secondary::refresh::Primaries,
    /// The member's policy, but for its journal file: shared by the
    /// members that keep none, not copied for each of 100,000.
    pub policy: Arc<ZonePolicy>,
    pub keep_journal: bool,
    /// `DIR/{zone}.zone`, which the members share.
    pub kept: KeptFile,
    /// DIR, the members' folder.
    pub dir: PathBuf,
    /// The files the configuration uses in DIR.
    pub in_use: FilesInUse,
}

/// The names of the files the configuration uses in a members' folder,
/// as octets, sorted: no member may be kept over one, or over its
/// journal (`NAME.jnl`) or the like.
#[derive(Clone, Debug, Default)]
pub struct FilesInUse(Arc<BTreeSet<Vec<u8>>>);

/// Tells each template of `catalogs` which of `used` (the files the
/// configuration names) are in its members' folder.
pub fn mark_files_in_use<'a>(
    catalogs: &mut [CatalogConfig],
    used: impl IntoIterator<Item = &'a Path>,
) {
    let mut templates: Vec<&mut Template> = catalogs
        .iter_mut()
        .flat_map(|c| c.templates_mut())
        .collect();
    if templates.is_empty() {
        return;
    }
    let folders: Vec<&Path> = templates.iter().map(|t| t.dir.as_path()).collect();
    let names = super::shared_files::names_in(&folders, used);
    for (template, names) in templates.iter_mut().zip(names) {
        template.in_use = FilesInUse(Arc::new(names));
    }
}

impl CatalogConfig {
    /// The template for a member of `group`: the group's, else the
    /// default (unless `groups-only`).
    pub fn template(&self, group: Option<&str>) -> Option<&Template> {
        group
            .and_then(|g| self.groups.get(g))
            .or(self.default.as_ref())
    }
}

impl Template {
    /// `zone`'s kept file, if the configuration uses it (or a file whose
    /// name starts with its name) for something else.
    pub fn file_in_use(&self, zone: &Name) -> Option<PathBuf> {
        use std::ops::Bound;
        use std::os::unix::ffi::OsStrExt;
        let file = self.kept.path(&zone.to_lowercase());
        let name = file.file_name()?.as_bytes();
        let range = (Bound::Included(name), Bound::Unbounded);
        let used = self.in_use.0.range::<[u8], _>(range).next()?;
        used.starts_with(name).then(|| file.into_owned())
    }

    /// The kept copy (and journal) a build before named after the
    /// member's spelling, renamed to the lower-cased name's, unless that
    /// one is there already (regression hunt: after the upgrade a member
    /// kept as `B.test.zone` answered SERVFAIL with its primary down, and
    /// the old file stayed behind).
    fn take_up_spelt_files(&self, spelt: &Name, zone: &Name) {
        let (old, new) = (self.kept.path(spelt), self.kept.path(zone));
        let journals = (journal_file::path_for(&old), journal_file::path_for(&new));
        for (from, to) in [(old.as_ref(), new.as_ref()), (&journals.0, &journals.1)] {
            if from != to && from.exists() && !to.exists() {
                match std::fs::rename(from, to) {
                    Ok(()) => tracing::info!(
                        "kept copy {} is {} now: members are named in lower case",
                        from.display(),
                        to.display()
                    ),
                    Err(e) => {
                        tracing::warn!("cannot rename {} to {}: {e}", from.display(), to.display())
                    }
                }
            }
        }
    }

    /// Member zone `zone` of `catalog` as this template makes it. Its
    /// name is lower-cased: the catalog's versions may spell it in other
    /// cases (an IXFR's compression can), and its kept copy must be found
    /// under one file name whatever the last version said.
    pub fn member(&self, zone: &Name, catalog: &Name) -> (SecondaryZone, Arc<ZonePolicy>) {
        let spelt = zone;
        let zone = &zone.to_lowercase();
        if spelt.as_wire() != zone.as_wire() {
            self.take_up_spelt_files(spelt, zone);
        }
        let mut policy = self.policy.clone();
        if self.keep_journal && !policy.allow_transfer.is_empty() {
            let file = self.kept.path(zone);
            Arc::make_mut(&mut policy).journal_file = Some(journal_file::path_for(&file));
        }
        let secondary = SecondaryZone {
            origin: zone.clone(),
            primaries: self.primaries.clone(),
            file: self.kept.clone(),
            catalog: Some(catalog.clone()),
        };
        (secondary, policy)
    }
}

impl CatalogEntry {
    /// The catalog zone's own settings, as a `[[zone]]` would give them.
    pub(super) fn zone_options(&self) -> ZoneOptions<'_> {
        ZoneOptions {
            allow_transfer: &self.allow_transfer,
            allow_notify: &[],
            allow_query: None,
            notify: &self.notify,
            primaries: &self.primaries,
            journal: None,
            catalog_member: None,
            catalog_group: None,
            catalog_id_generation: 0,
        }
    }

    /// The catalog resolved against the keys, with paths from `base`.
    pub(super) fn resolve(&self, keys: &[Key], base: &Path) -> Result<CatalogConfig, String> {
        let zone = Name::parse(&self.zone).map_err(|e| format!("bad zone '{}': {e}", self.zone))?;
        if self.primaries.is_empty() {
            return Err("primaries is empty".into());
        }
        if self.max_members == 0 {
            return Err("max-members must be at least 1".into());
        }
        let template = |t: &TemplateEntry, what: &str| {
            self.template(t, keys, base)
                .map_err(|e| format!("{what}: {e}"))
        };
        let default = match self.groups_only {
            true => None,
            false => Some(template(&self.default, "default")?),
        };
        let mut groups = BTreeMap::new();
        for (name, entry) in &self.group {
            groups.insert(name.clone(), template(entry, &format!("group {name:?}"))?);
        }
        Ok(CatalogConfig {
            zone,
            default,
            groups,
            max_members: self.max_members,
        })
    }

    fn template(&self, t: &TemplateEntry, keys: &[Key], base: &Path) -> Result<Template, String> {
        let primaries = match t.primaries.is_empty() {
            true => &self.primaries,
            false => &t.primaries,
        };
        let options = ZoneOptions {
            allow_transfer: &t.allow_transfer,
            allow_notify: &t.allow_notify,
            allow_query: None,
            notify: &t.notify,
            primaries,
            journal: t.journal,
            catalog_member: None,
            catalog_group: None,
            catalog_id_generation: 0,
        };
        let settings = zone_settings(options, keys)?;
        let dir = base.join(t.members_dir.as_ref().unwrap_or(&self.members_dir));
        Ok(Template {
            primaries: settings.primaries,
            policy: Arc::new(settings.policy),
            keep_journal: settings.keep_journal,
            kept: KeptFile::pattern(format!("{}/{{zone}}.zone", dir.display())),
            dir,
            in_use: FilesInUse::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests_support::parse;
    use std::sync::Arc;

    const KEY: &str = "[[key]]\nname = \"xfr\"\nsecret = \"c2VjcmV0c2VjcmV0c2VjcmV0\"\n";

    const CATALOG: &str = "[[catalog]]\nzone = \"cat.example\"\nfile = \"kept/cat.zone\"\n\
        primaries = [\"192.0.2.1 key xfr\"]\nmembers-dir = \"members\"\n";

    #[test]
    fn a_catalog_is_a_secondary_zone_and_its_templates_default_to_its_primaries() {
        let text = format!(
            "{KEY}{CATALOG}allow-transfer = [\"::1\"]\n\
             [catalog.default]\nnotify = [\"192.0.2.9\"]\n\
             [catalog.group.gold]\nprimaries = [\"192.0.2.2\"]\nmembers-dir = \"gold\"\n\
             allow-transfer = [\"127.0.0.1\"]\n"
        );
        let settings = parse(&text).unwrap();
        let [catalog_zone] = settings.secondaries.as_slice() else {
            panic!("{:?}", settings.secondaries)
        };
        assert_eq!(catalog_zone.origin.to_string(), "cat.example.");
        assert_eq!(
            catalog_zone.kept_path().to_str(),
            Some("/etc/heron/kept/cat.zone")
        );
        assert_eq!(catalog_zone.catalog, None);
        let [catalog] = settings.catalogs.as_slice() else {
            panic!()
        };
        assert_eq!(catalog.max_members, super::DEFAULT_MAX_MEMBERS);
        let zone = heron_proto::Name::parse("a.example").unwrap();
        let (member, policy) = catalog.template(None).unwrap().member(&zone, &catalog.zone);
        assert_eq!(member.primaries[0].addr.to_string(), "192.0.2.1:53");
        assert_eq!(
            member.primaries[0].key.as_ref().unwrap().to_string(),
            "xfr."
        );
        assert_eq!(
            member.kept_path().to_str(),
            Some("/etc/heron/members/a.example.zone")
        );
        assert_eq!(member.catalog, Some(catalog.zone.clone()));
        assert_eq!(policy.notify.len(), 1);
        assert!(policy.allow_transfer.is_empty() && !policy.allow_notify.is_empty());
        // Members without a journal of their own share their template's
        // policy; those with one get theirs.
        let other = heron_proto::Name::parse("b.example").unwrap();
        let (_, shared) = catalog
            .template(None)
            .unwrap()
            .member(&other, &catalog.zone);
        assert!(Arc::ptr_eq(&policy, &shared));
        let gold_template = catalog.template(Some("gold")).unwrap();
        let (_, gold_other) = gold_template.member(&other, &catalog.zone);
        let (gold, policy) = gold_template.member(&zone, &catalog.zone);
        assert!(!Arc::ptr_eq(&policy, &gold_other));
        assert_eq!(
            gold_other.journal_file.as_deref().and_then(|p| p.to_str()),
            Some("/etc/heron/gold/b.example.zone.jnl")
        );
        assert_eq!(gold.primaries[0].addr.to_string(), "192.0.2.2:53");
        assert_eq!(
            gold.kept_path().to_str(),
            Some("/etc/heron/gold/a.example.zone")
        );
        assert_eq!(
            policy.journal_file.as_deref().and_then(|p| p.to_str()),
            Some("/etc/heron/gold/a.example.zone.jnl")
        );
        // An unknown group follows the default template...
        assert!(catalog.template(Some("lead")).is_some());
        // ...unless there is none.
        let strict = parse(&format!(
            "{KEY}{CATALOG}groups-only = true\nmax-members = 1\n"
        ))
        .unwrap();
        assert_eq!(strict.catalogs[0].max_members, 1);
        assert!(strict.catalogs[0].template(Some("lead")).is_none());
        assert!(strict.catalogs[0].template(None).is_none());
    }

    /// The files the configuration keeps in a members' folder, found by
    /// whatever path names them: a zone's file, a kept copy, a journal,
    /// the catalog's own copy, a generated catalog. A nested folder is
    /// another template's, and a folder elsewhere holds nothing of them.
    #[test]
    fn a_member_is_not_kept_over_a_file_the_configuration_uses() {
        let text = format!(
            "{KEY}[[catalog]]\nzone = \"cat.example\"\nfile = \"members/cat.zone\"\n\
             primaries = [\"192.0.2.1 key xfr\"]\nmembers-dir = \"members\"\n\
             [catalog.group.nested]\nmembers-dir = \"members/nested\"\n\
             [[zone]]\norigin = \"hand.example\"\nfile = \"members/../members/victim.zone\"\n\
             [[zone]]\norigin = \"j.example\"\nfile = \"elsewhere/j.zone\"\n\
             allow-transfer = [\"::1\"]\n\
             [[zone]]\norigin = \"k.example\"\nfile = \"members/./kept.zone\"\n\
             primaries = [\"192.0.2.1\"]\nallow-transfer = [\"::1\"]\n\
             [[zone]]\norigin = \"gen.example\"\nfile = \"members/nested/gen.zone\"\n\
             catalog = \"generate\"\n\
             [[zone]]\norigin = \"q.example\"\nfile = \"members/q.zone.jnl\"\n"
        );
        let settings = parse(&text).unwrap();
        let catalog = &settings.catalogs[0];
        let in_use = |group: Option<&str>, zone: &str| {
            let template = catalog.template(group).unwrap();
            let zone = heron_proto::Name::parse(zone).unwrap();
            template.file_in_use(&zone).map(|f| f.display().to_string())
        };
        let member = |name: &str| Some(format!("/etc/heron/members/{name}"));
        assert_eq!(in_use(None, "victim"), member("victim.zone"));
        assert_eq!(in_use(None, "cat"), member("cat.zone"));
        // k.example's kept copy, and its journal beside it.
        assert_eq!(in_use(None, "kept"), member("kept.zone"));
        assert_eq!(in_use(None, "q"), member("q.zone"), "its journal's name");
        assert_eq!(in_use(None, "j"), None, "elsewhere");
        assert_eq!(in_use(None, "gen"), None, "in a folder of its own");
        assert_eq!(in_use(None, "a.example"), None);
        let nested = Some("/etc/heron/members/nested/gen.zone".to_string());
        assert_eq!(in_use(Some("nested"), "gen"), nested);
        assert_eq!(in_use(Some("nested"), "victim"), None);
    }

    #[test]
    fn catalog_mistakes_are_reported() {
        for (text, want) in [
            (
                "[[catalog]]\nzone = \"cat.example\"\nfile = \"c\"\nprimaries = []\nmembers-dir = \"m\"\n",
                "catalog 'cat.example': primaries is empty",
            ),
            (
                "[[catalog]]\nzone = \"cat..example\"\nfile = \"c\"\nprimaries = [\"192.0.2.1\"]\nmembers-dir = \"m\"\n",
                "bad zone 'cat..example'",
            ),
            (
                &format!("{CATALOG}[catalog.group.gold]\nprimaries = [\"192.0.2.2 key nope\"]\n"),
                "group \"gold\": primaries '192.0.2.2 key nope'",
            ),
            (
                &format!("{CATALOG}[catalog.default]\nfile = \"x\"\n"),
                "unknown field `file`",
            ),
            ("[[catalog]]\nzone = \"cat.example\"\n", "missing field"),
            (
                &format!("{CATALOG}max-members = 0\n"),
                "catalog 'cat.example': max-members must be at least 1",
            ),
        ] {
            let errors = parse(&format!("{KEY}{text}")).unwrap_err();
            assert!(
                errors.iter().any(|e| e.contains(want)),
                "{want}: {errors:?}"
            );
        }
    }

    #[test]
    fn a_catalog_zone_also_configured_as_a_zone_is_an_error() {
        let text =
            format!("{KEY}{CATALOG}[[zone]]\norigin = \"cat.example\"\nfile = \"other.zone\"\n");
        let errors = parse(&text).unwrap_err();
        assert!(
            errors
                .iter()
                .any(|e| e.contains("configured more than once")),
            "{errors:?}"
        );
    }
}
