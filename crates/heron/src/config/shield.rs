//! `[rrl]` and `[cookies]`: response rate limiting and DNS cookies
//! (issue 25), read into the settings `heron_server::rrl` and
//! `heron_proto::cookie` define; their ranges are checked there.

use heron_proto::cookie::{CookieSettings, Secret};
use heron_server::rrl::RrlSettings;
use serde::Deserialize;

/// `[rrl]`: off unless the section is there with `enabled` left true.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RrlSection {
    #[serde(default = "yes")]
    pub enabled: bool,
    pub responses_per_second: Option<u32>,
    pub nxdomains_per_second: Option<u32>,
    pub errors_per_second: Option<u32>,
    pub window: Option<u32>,
    pub slip: Option<u32>,
    pub ipv4_prefix_length: Option<u8>,
    pub ipv6_prefix_length: Option<u8>,
    #[serde(default)]
    pub exempt: Vec<String>,
    #[serde(default)]
    pub log_only: bool,
    pub table_size: Option<usize>,
}

fn yes() -> bool {
    true
}

impl RrlSection {
    /// The settings, None when disabled; errors name the key.
    pub fn settings(&self) -> Result<Option<RrlSettings>, Vec<String>> {
        let default = RrlSettings::default();
        let mut errors = Vec::new();
        let exempt = self
            .exempt
            .iter()
            .filter_map(|p| {
                p.parse()
                    .map_err(|e| errors.push(format!("[rrl] exempt '{p}': {e}")))
                    .ok()
            })
            .collect();
        let settings = RrlSettings {
            responses_per_second: self
                .responses_per_second
                .unwrap_or(default.responses_per_second),
            nxdomains_per_second: self.nxdomains_per_second,
            errors_per_second: self.errors_per_second,
            window: self.window.unwrap_or(default.window),
            slip: self.slip.unwrap_or(default.slip),
            ipv4_prefix_length: self
                .ipv4_prefix_length
                .unwrap_or(default.ipv4_prefix_length),
            ipv6_prefix_length: self
                .ipv6_prefix_length
                .unwrap_or(default.ipv6_prefix_length),
            exempt,
            log_only: self.log_only,
            table_size: self.table_size.unwrap_or(default.table_size),
        };
        if let Err(e) = settings.validate() {
            errors.push(format!("[rrl] {e}"));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(self.enabled.then_some(settings))
    }
}

/// `[cookies]`: on by default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CookiesSection {
    pub enabled: Option<bool>,
    /// 32 hexadecimal digits.
    pub secret: Option<String>,
    pub previous_secret: Option<String>,
    pub rotation_grace: Option<u32>,
    #[serde(default)]
    pub require: bool,
}

impl CookiesSection {
    pub fn settings(&self) -> Result<CookieSettings, Vec<String>> {
        let default = CookieSettings::default();
        let mut errors = Vec::new();
        let mut secret = |key: &str, value: &Option<String>| {
            value.as_deref().and_then(|hex| {
                parse_secret(hex)
                    .map_err(|e| errors.push(format!("[cookies] {key}: {e}")))
                    .ok()
            })
        };
        let settings = CookieSettings {
            enabled: self.enabled.unwrap_or(default.enabled),
            secret: secret("secret", &self.secret),
            previous_secret: secret("previous-secret", &self.previous_secret),
            rotation_grace: self.rotation_grace.unwrap_or(default.rotation_grace),
            require: self.require,
        };
        if settings.previous_secret.is_some() && self.secret.is_none() {
            errors.push("[cookies] previous-secret needs secret".to_string());
        }
        if settings.require && !settings.enabled {
            let why = "[cookies] require = true with enabled = false: nothing would be required";
            errors.push(why.to_string());
        }
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors)
        }
    }
}

/// A 16-octet secret from 32 hexadecimal digits.
fn parse_secret(hex: &str) -> Result<Secret, String> {
    let wrong = || format!("'{hex}' is not 32 hexadecimal digits (16 octets)");
    if hex.len() != 32 || !hex.is_ascii() {
        return Err(wrong());
    }
    let mut secret = Secret::default();
    for (i, octet) in secret.iter_mut().enumerate() {
        *octet = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| wrong())?;
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rrl(text: &str) -> Result<Option<RrlSettings>, Vec<String>> {
        toml::from_str::<RrlSection>(text)
            .map_err(|e| vec![e.to_string()])?
            .settings()
    }

    fn cookies(text: &str) -> Result<CookieSettings, Vec<String>> {
        toml::from_str::<CookiesSection>(text)
            .map_err(|e| vec![e.to_string()])?
            .settings()
    }

    #[test]
    fn rrl_keys_are_read_and_ranges_checked_at_and_past_the_limit() {
        let s = rrl("responses-per-second = 50\nslip = 10\nwindow = 3600\n\
                     ipv4-prefix-length = 32\nipv6-prefix-length = 128\n\
                     exempt = [\"10.0.0.0/8\"]\nlog-only = true\ntable-size = 1024\n\
                     nxdomains-per-second = 5\nerrors-per-second = 0")
        .unwrap()
        .unwrap();
        assert_eq!(
            (s.responses_per_second, s.slip, s.window, s.table_size),
            (50, 10, 3600, 1024)
        );
        assert_eq!(
            (s.nxdomains_per_second, s.errors_per_second),
            (Some(5), Some(0))
        );
        assert!(s.log_only && s.exempt.len() == 1);
        assert_eq!(rrl("enabled = false").unwrap(), None);
        for (bad, says) in [
            ("slip = 11", "slip"),
            ("window = 0", "window"),
            ("window = 3601", "window"),
            ("ipv4-prefix-length = 33", "ipv4-prefix-length"),
            ("ipv6-prefix-length = 129", "ipv6-prefix-length"),
            ("table-size = 0", "table-size"),
            ("table-size = 16777217", "table-size"),
            ("exempt = [\"10.0.0.0/33\"]", "exempt"),
            ("rate = 5", "unknown field"),
        ] {
            let e = rrl(bad).unwrap_err();
            assert!(e.iter().any(|e| e.contains(says)), "{bad}: {e:?}");
        }
    }

    #[test]
    fn cookie_secrets_are_32_hex_digits() {
        let s = cookies(
            "secret = \"000102030405060708090a0b0c0d0e0f\"\n\
             previous-secret = \"FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF\"\nrequire = true",
        )
        .unwrap();
        assert_eq!(s.secret.unwrap()[15], 15);
        assert_eq!(s.previous_secret, Some([0xFF; 16]));
        assert!(s.enabled && s.require);
        assert!(!cookies("enabled = false").unwrap().enabled);
        assert_eq!(cookies("").unwrap(), CookieSettings::default());
        for bad in [
            "secret = \"000102030405060708090a0b0c0d0e\"",
            "secret = \"000102030405060708090a0b0c0d0e0f00\"",
            "secret = \"000102030405060708090a0b0c0d0e0g\"",
            "secret = \"é00102030405060708090a0b0c0d0e0\"",
            "previous-secret = \"000102030405060708090a0b0c0d0e0f\"",
            "required = true",
            "enabled = false\nrequire = true",
        ] {
            assert!(cookies(bad).is_err(), "{bad}");
        }
    }
}
