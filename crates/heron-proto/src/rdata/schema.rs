//! The fields of each supported type, in wire order.

use crate::types::RType;

/// One RDATA field. The `&str` is its name in error messages.
#[derive(Clone, Copy, Debug)]
pub enum Field {
    U8(&'static str),
    U16(&'static str),
    U32(&'static str),
    /// A u32 of seconds; text also takes units (`1h30m`, `2w`).
    Period(&'static str),
    /// RRSIG expiration and inception.
    SigTime(&'static str),
    /// A DNSSEC algorithm number; text also takes mnemonics.
    Algorithm,
    /// CERT certificate type; mnemonics in text both ways.
    CertType,
    /// RRSIG type covered: a type mnemonic or `TYPEnnn`.
    TypeCovered,
    DomainName(&'static str),
    CharString(&'static str),
    /// One or more character-strings to the end of the RDATA.
    CharStrings,
    Ipv4(&'static str),
    Ipv6,
    Eui48,
    Eui64,
    /// Four 16-bit groups in hex (NID, L64).
    Ilnp64(&'static str),
    /// Hex to the end of the RDATA, non-empty; text may be split.
    Hex(&'static str),
    /// Base64 to the end of the RDATA, non-empty; text may be split.
    Base64(&'static str),
    /// NSEC3 salt: one-octet length, hex or `-` in text.
    Salt,
    /// NSEC3 next hashed owner: one-octet length, base32hex in text.
    NextHashed,
    /// Type bitmap to the end of the RDATA (RFC 4034 4.1.2).
    Bitmap,
    /// CAA tag: one-octet length, letters and digits.
    CaaTag,
    /// CAA value: the rest of the RDATA as one string.
    CaaValue,
    /// URI target: the rest of the RDATA as one non-empty string.
    UriTarget,
    /// SVCB and HTTPS SvcParams to the end of the RDATA.
    SvcParams,
    /// All of LOC.
    Loc,
    /// A character-string that may be left out (ISDN's subaddress).
    OptCharString(&'static str),
    /// All of APL, IPSECKEY, AMTRELAY and HIP (`rare`).
    Apl,
    IpsecKey,
    AmtRelay,
    Hip,
    /// WKS protocol and services bitmap.
    Wks,
    /// An NSAP address: `0x` and hex in text.
    Nsap,
}

/// The fields of a supported type; `None` for types only handled in the
/// RFC 3597 generic form.
pub fn fields(rtype: RType) -> Option<&'static [Field]> {
    use Field::*;
    const DS: &[Field] = &[U16("key tag"), Algorithm, U8("digest type"), Hex("digest")];
    const DNSKEY: &[Field] = &[
        U16("flags"),
        U8("protocol"),
        Algorithm,
        Base64("public key"),
    ];
    const TLSA: &[Field] = &[
        U8("certificate usage"),
        U8("selector"),
        U8("matching type"),
        Hex("certificate association data"),
    ];
    Some(match rtype {
        RType::A => &[Ipv4("address")],
        RType::NS => &[DomainName("nameserver")],
        RType::MD | RType::MF | RType::MB => &[DomainName("host")],
        RType::CNAME | RType::DNAME => &[DomainName("target")],
        RType::SOA => &[
            DomainName("primary nameserver (mname)"),
            DomainName("responsible mailbox (rname)"),
            U32("serial"),
            Period("refresh"),
            Period("retry"),
            Period("expire"),
            Period("minimum"),
        ],
        RType::MG => &[DomainName("mailbox")],
        RType::MR => &[DomainName("new mailbox")],
        RType::PTR => &[DomainName("target")],
        RType::HINFO => &[CharString("cpu"), CharString("os")],
        RType::MINFO => &[DomainName("rmailbx"), DomainName("emailbx")],
        RType::MX => &[U16("preference"), DomainName("exchange")],
        RType::TXT | RType::SPF => &[CharStrings],
        RType::RP => &[DomainName("mailbox"), DomainName("TXT name")],
        RType::AFSDB => &[U16("subtype"), DomainName("hostname")],
        RType::RT => &[U16("preference"), DomainName("intermediate host")],
        RType::AAAA => &[Ipv6],
        RType::LOC => &[Loc],
        RType::SRV => &[
            U16("priority"),
            U16("weight"),
            U16("port"),
            DomainName("target"),
        ],
        RType::NAPTR => &[
            U16("order"),
            U16("preference"),
            CharString("flags"),
            CharString("services"),
            CharString("regexp"),
            DomainName("replacement"),
        ],
        RType::KX => &[U16("preference"), DomainName("exchanger")],
        RType::CERT => &[CertType, U16("key tag"), Algorithm, Base64("certificate")],
        RType::DS | RType::CDS | RType::TA | RType::DLV => DS,
        RType::SSHFP => &[U8("algorithm"), U8("fingerprint type"), Hex("fingerprint")],
        RType::RRSIG | RType::SIG => &[
            TypeCovered,
            Algorithm,
            U8("labels"),
            Period("original TTL"),
            SigTime("expiration"),
            SigTime("inception"),
            U16("key tag"),
            DomainName("signer"),
            Base64("signature"),
        ],
        RType::NSEC => &[DomainName("next domain name"), Bitmap],
        // KEY (RFC 2535, RFC 3445) is laid out as DNSKEY is; BIND, NSD and
        // Knot read it in this text form.
        RType::DNSKEY | RType::CDNSKEY | RType::KEY => DNSKEY,
        RType::DHCID => &[Base64("DHCID data")],
        RType::NSEC3 => &[
            U8("hash algorithm"),
            U8("flags"),
            U16("iterations"),
            Salt,
            NextHashed,
            Bitmap,
        ],
        RType::NSEC3PARAM => &[U8("hash algorithm"), U8("flags"), U16("iterations"), Salt],
        RType::TLSA | RType::SMIMEA => TLSA,
        RType::OPENPGPKEY => &[Base64("public key")],
        RType::CSYNC => &[U32("SOA serial"), U16("flags"), Bitmap],
        RType::ZONEMD => &[
            U32("serial"),
            U8("scheme"),
            U8("hash algorithm"),
            Hex("digest"),
        ],
        RType::SVCB | RType::HTTPS => &[U16("priority"), DomainName("target"), SvcParams],
        RType::NID => &[U16("preference"), Ilnp64("node ID")],
        RType::L32 => &[U16("preference"), Ipv4("locator")],
        RType::L64 => &[U16("preference"), Ilnp64("locator")],
        RType::LP => &[U16("preference"), DomainName("FQDN")],
        RType::EUI48 => &[Eui48],
        RType::EUI64 => &[Eui64],
        RType::URI => &[U16("priority"), U16("weight"), UriTarget],
        RType::CAA => &[U8("flags"), CaaTag, CaaValue],
        RType::AVC => &[CharStrings],
        RType::WKS => &[Ipv4("address"), Wks],
        RType::X25 => &[CharString("PSDN address")],
        RType::ISDN => &[CharString("ISDN address"), OptCharString("subaddress")],
        RType::NSAP => &[Nsap],
        RType::PX => &[
            U16("preference"),
            DomainName("MAP822"),
            DomainName("MAPX400"),
        ],
        RType::APL => &[Apl],
        RType::IPSECKEY => &[IpsecKey],
        RType::AMTRELAY => &[AmtRelay],
        RType::HIP => &[Hip],
        _ => return None,
    })
}

/// DNSSEC algorithm mnemonics (RFC 4034 A.1 and the IANA registry).
pub const ALGORITHMS: &[(&str, u8)] = &[
    ("RSAMD5", 1),
    ("DH", 2),
    ("DSA", 3),
    ("RSASHA1", 5),
    ("DSA-NSEC3-SHA1", 6),
    ("RSASHA1-NSEC3-SHA1", 7),
    ("RSASHA256", 8),
    ("RSASHA512", 10),
    ("ECC-GOST", 12),
    ("ECDSAP256SHA256", 13),
    ("ECDSAP384SHA384", 14),
    ("ED25519", 15),
    ("ED448", 16),
    ("INDIRECT", 252),
    ("PRIVATEDNS", 253),
    ("PRIVATEOID", 254),
];

/// CERT certificate types (RFC 4398 2.1).
pub const CERT_TYPES: &[(&str, u16)] = &[
    ("PKIX", 1),
    ("SPKI", 2),
    ("PGP", 3),
    ("IPKIX", 4),
    ("ISPKI", 5),
    ("IPGP", 6),
    ("ACPKIX", 7),
    ("IACPKIX", 8),
    ("URI", 253),
    ("OID", 254),
];
