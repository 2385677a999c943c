//! Who is buying and where the parcel goes: the shopper's email and shipping address, to be
//! asked at the checkout and made part of the order. One parse for the API, the checkout's
//! two doors and the page, so that each field's problem is said in the same words wherever
//! it was typed.

use serde::{Deserialize, Serialize};

/// The countries the shop ships to: ISO 3166-1 alpha-2 code and the name the page shows.
pub const COUNTRIES: &[(&str, &str)] = &[
    ("AT", "Austria"),
    ("BE", "Belgium"),
    ("CH", "Switzerland"),
    ("DE", "Germany"),
    ("DK", "Denmark"),
    ("ES", "Spain"),
    ("FI", "Finland"),
    ("FR", "France"),
    ("GB", "United Kingdom"),
    ("IE", "Ireland"),
    ("IT", "Italy"),
    ("LU", "Luxembourg"),
    ("NL", "Netherlands"),
    ("NO", "Norway"),
    ("PL", "Poland"),
    ("PT", "Portugal"),
    ("SE", "Sweden"),
    ("US", "United States"),
];

/// The name of a country the shop ships to, by its code.
pub fn country_name(code: &str) -> Option<&'static str> {
    COUNTRIES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, name)| *name)
}

/// The longest text each field takes, in characters (an email address's own bound, RFC 5321).
pub const MAX_EMAIL: usize = 254;
/// The longest name, address line or city.
pub const MAX_LINE: usize = 100;
/// The longest postal code (the longest in use is 10; room for spaces and dashes).
pub const MAX_POSTAL_CODE: usize = 16;

/// Where an order is shipped.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ShippingAddress {
    /// The person the parcel is for.
    pub name: String,
    pub line1: String,
    /// A second address line; empty (or absent) when there is none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub line2: String,
    pub postal_code: String,
    pub city: String,
    /// ISO 3166-1 alpha-2, one of the countries the shop ships to.
    pub country: String,
}

/// The shopper's details as typed: what the checkout keeps while the shopper types, and what
/// an order request carries. [`Details::parse`] turns it into checked details.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DetailsDraft {
    pub email: String,
    pub shipping_address: ShippingAddress,
}

impl DetailsDraft {
    /// The draft with each field cut one character past its bound: what a page keeps while
    /// the shopper types, bounded in size, and still refused by [`Details::parse`] as too
    /// long when it was.
    pub fn bounded(&self) -> Self {
        // NUL is dropped: PostgreSQL cannot keep it in text (nor in JSON), and the order is
        // checked from what its request carries, where NUL is refused like any control.
        let cut = |value: &str, max: usize| {
            value
                .chars()
                .filter(|c| *c != '\0')
                .take(max + 1)
                .collect::<String>()
        };
        let a = &self.shipping_address;
        Self {
            email: cut(&self.email, MAX_EMAIL),
            shipping_address: ShippingAddress {
                name: cut(&a.name, MAX_LINE),
                line1: cut(&a.line1, MAX_LINE),
                line2: cut(&a.line2, MAX_LINE),
                postal_code: cut(&a.postal_code, MAX_POSTAL_CODE),
                city: cut(&a.city, MAX_LINE),
                country: cut(&a.country, 2),
            },
        }
    }
}

impl ShippingAddress {
    /// The address as a label shows it, one line each: name, street lines, postal code and
    /// city, country.
    pub fn lines(&self) -> Vec<String> {
        let country = country_name(&self.country).unwrap_or(&self.country);
        [
            self.name.clone(),
            self.line1.clone(),
            self.line2.clone(),
            format!("{} {}", self.postal_code, self.city),
            country.to_owned(),
        ]
        .into_iter()
        .filter(|line| !line.trim().is_empty())
        .collect()
    }
}

/// A field the shopper must fix, and what is wrong with it, in words for the shopper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldProblem {
    /// The field, as the request names it: `email`, `shipping_address.postal_code`, …
    pub field: String,
    pub detail: String,
}

/// Checked details: every field trimmed, present where required, within its bound, the email
/// shaped like an address and the country one the shop ships to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Details(DetailsDraft);

impl Details {
    /// Checks every field, and names each one that must be fixed.
    pub fn parse(draft: &DetailsDraft) -> Result<Self, Vec<FieldProblem>> {
        let a = &draft.shipping_address;
        let mut problems = Vec::new();
        let mut field = |name: &str, checked: Result<String, String>| match checked {
            Ok(value) => value,
            Err(detail) => {
                problems.push(FieldProblem {
                    field: name.to_owned(),
                    detail,
                });
                String::new()
            }
        };
        let email = field("email", email(&draft.email));
        let shipping_address = ShippingAddress {
            name: field(
                "shipping_address.name",
                text(&a.name, "your name", MAX_LINE),
            ),
            line1: field(
                "shipping_address.line1",
                text(&a.line1, "the street and number", MAX_LINE),
            ),
            line2: field("shipping_address.line2", optional_text(&a.line2, MAX_LINE)),
            postal_code: field("shipping_address.postal_code", postal_code(&a.postal_code)),
            city: field("shipping_address.city", text(&a.city, "the city", MAX_LINE)),
            country: field("shipping_address.country", country(&a.country)),
        };
        match problems.is_empty() {
            true => Ok(Self(DetailsDraft {
                email,
                shipping_address,
            })),
            false => Err(problems),
        }
    }

    pub fn email(&self) -> &str {
        &self.0.email
    }

    pub fn shipping_address(&self) -> &ShippingAddress {
        &self.0.shipping_address
    }

    /// The details as an order request carries them.
    pub fn as_draft(&self) -> &DetailsDraft {
        &self.0
    }
}

/// Text a person typed on one line: no control characters (a line break would let an
/// address forge a header of the email that names it), no line or paragraph separators
/// (U+2028, U+2029: a line break by another name), and no characters that change what the
/// text shows without showing themselves: bidirectional controls (U+202E would show a
/// label's text reversed, to the courier and to the operator) and tag characters outside
/// a flag (they carry text nobody sees).
fn one_line(value: &str) -> Result<&str, String> {
    let value = value.trim();
    match value.chars().any(breaks_the_line) {
        true => Err("Use one line, without tabs or line breaks.".to_owned()),
        false if value.chars().any(is_bidi_control) || has_stray_tags(value) => {
            Err("Remove the invisible characters from this text.".to_owned())
        }
        false => Ok(value),
    }
}

fn breaks_the_line(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

/// Unicode's Bidi_Control characters.
fn is_bidi_control(c: char) -> bool {
    matches!(c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Whether the text holds tag characters (U+E0000 to U+E007F) anywhere but in a flag: a
/// black flag (U+1F3F4), tags, and the cancel tag (U+E007F) that ends them, as the flags
/// of England, Scotland and Wales are written.
fn has_stray_tags(value: &str) -> bool {
    // `open`: inside a flag's tags, not yet cancelled; `flag`: the last character was U+1F3F4.
    let (mut open, mut flag) = (false, false);
    for c in value.chars() {
        match c {
            '\u{E0020}'..='\u{E007E}' if open || flag => open = true,
            '\u{E007F}' if open => open = false,
            '\u{E0000}'..='\u{E007F}' => return true,
            _ if open => return true,
            _ => {}
        }
        flag = c == '\u{1F3F4}';
    }
    open
}

/// Whether a character shows nothing by itself: white space, Unicode's
/// Default_Ignorable_Code_Point set (zero-width spaces and joiners, the word joiner, the
/// byte order mark, the soft hyphen, variation selectors, Hangul fillers, …), and the blank
/// Braille pattern. They may sit inside a name (a joiner in an emoji, a non-joiner in a
/// Persian name), but never make one.
fn is_invisible(c: char) -> bool {
    c.is_whitespace()
        || matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}'
            | '\u{17B4}' | '\u{17B5}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{2800}' | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
}

/// Whether the text shows a letter or a digit: a name, a street or a city has one; a text of
/// invisible characters, of combining marks alone or of blanks has none.
fn visible(value: &str) -> bool {
    value
        .chars()
        .any(|c| c.is_alphanumeric() && !is_invisible(c))
}

fn within(value: &str, max: usize) -> Result<String, String> {
    match value.chars().count() > max {
        true => Err(format!("Use at most {max} characters.")),
        false => Ok(value.to_owned()),
    }
}

fn text(value: &str, what: &str, max: usize) -> Result<String, String> {
    let value = one_line(value)?;
    if !visible(value) {
        return Err(format!("Enter {what}."));
    }
    within(value, max)
}

fn optional_text(value: &str, max: usize) -> Result<String, String> {
    let value = one_line(value)?;
    match value.is_empty() || !value.chars().all(is_invisible) {
        true => within(value, max),
        false => Err("Leave it empty, or enter text that shows.".to_owned()),
    }
}

fn email(value: &str) -> Result<String, String> {
    let value = one_line(value)?;
    if value.is_empty() {
        return Err("Enter your email address, for the order's confirmation.".to_owned());
    }
    // The plain ASCII form of RFC 5322's address (no quoted local parts, no comments, no
    // international ones): what every mail server delivers, and what the mailer can write in
    // a header. A domain's labels are 1 to 63 letters, digits and inner hyphens (RFC 1035).
    let local_char = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+/=?^_`{|}~-".contains(c);
    let atom = |a: &str| !a.is_empty() && a.chars().all(local_char);
    let label = |l: &str| {
        (1..=63).contains(&l.len())
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    // The last label is a top-level domain, and no top-level domain is a number (`ada@1.2`
    // is no address): letters only, or an internationalised one's ASCII form (`xn--…`).
    let top_level = |l: &str| {
        (l.len() >= 2 && l.chars().all(|c| c.is_ascii_alphabetic())) || l.starts_with("xn--")
    };
    let shaped = value.split_once('@').is_some_and(|(local, domain)| {
        local.len() <= 64
            && local.split('.').all(atom)
            && domain.split('.').all(label)
            && domain
                .rsplit_once('.')
                .is_some_and(|(_, tld)| top_level(tld))
    });
    if !shaped {
        return Err("Enter an email address like name@example.com.".to_owned());
    }
    within(value, MAX_EMAIL)
}

fn postal_code(value: &str) -> Result<String, String> {
    let value = one_line(value)?;
    if value.is_empty() {
        return Err("Enter the postal code.".to_owned());
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == ' ' || c == '-';
    if !value.chars().all(allowed) {
        return Err("Use letters, digits, spaces and dashes only.".to_owned());
    }
    within(value, MAX_POSTAL_CODE)
}

fn country(value: &str) -> Result<String, String> {
    let code = value.trim();
    match country_name(code) {
        Some(_) => Ok(code.to_owned()),
        None if code.is_empty() => Err("Choose the country.".to_owned()),
        None => Err("The shop does not ship to this country.".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft() -> DetailsDraft {
        DetailsDraft {
            email: " ada@example.com ".to_owned(),
            shipping_address: ShippingAddress {
                name: "Ada Lovelace".to_owned(),
                line1: "12 St James's Square".to_owned(),
                line2: String::new(),
                postal_code: "SW1Y 4JH".to_owned(),
                city: "London".to_owned(),
                country: "GB".to_owned(),
            },
        }
    }

    fn fields(draft: &DetailsDraft) -> Vec<String> {
        Details::parse(draft)
            .unwrap_err()
            .into_iter()
            .map(|p| p.field)
            .collect()
    }

    #[test]
    fn good_details_are_kept_trimmed() {
        let details = Details::parse(&draft()).unwrap();
        assert_eq!(details.email(), "ada@example.com");
        assert_eq!(details.shipping_address().country, "GB");
    }

    #[test]
    fn every_field_with_a_problem_is_named() {
        let mut d = draft();
        d.email = "ada at example".to_owned();
        for wrong in [
            "ada@example",
            "ada@@example.com",
            "a..b@example.com",
            "ada@example..com",
            "\"a\"@example.com",
        ] {
            let mut e = draft();
            e.email = wrong.to_owned();
            assert_eq!(fields(&e), ["email"], "{wrong}");
        }
        d.shipping_address.name = "  ".to_owned();
        d.shipping_address.postal_code = "SW1Y;4JH".to_owned();
        d.shipping_address.country = "XX".to_owned();
        assert_eq!(
            fields(&d),
            [
                "email",
                "shipping_address.name",
                "shipping_address.postal_code",
                "shipping_address.country"
            ]
        );
    }

    #[test]
    fn a_line_break_never_passes() {
        let mut d = draft();
        d.email = "ada@example.com\r\nBcc: all@example.com".to_owned();
        d.shipping_address.line2 = "flat 2\n".to_owned() + "x";
        assert_eq!(fields(&d), ["email", "shipping_address.line2"]);
    }

    #[test]
    fn separators_and_direction_controls_never_pass() {
        for (name, city) in [
            ("Ada\u{2028}Bcc: all@example.com", "London"),
            ("Ada", "Lon\u{2029}don"),
            ("\u{202E}ecalevoL adA", "London"),
            ("Ada", "\u{2066}London\u{2069}"),
        ] {
            let mut d = draft();
            d.shipping_address.name = name.to_owned();
            d.shipping_address.city = city.to_owned();
            let field = match name == "Ada" {
                true => "shipping_address.city",
                false => "shipping_address.name",
            };
            assert_eq!(fields(&d), [field], "{name:?} {city:?}");
        }
    }

    #[test]
    fn a_field_must_show_something() {
        let mut d = draft();
        d.shipping_address.name = "\u{200B}\u{200D}\u{FEFF}\u{2060}".to_owned();
        d.shipping_address.line2 = "\u{00AD}\u{3164}".to_owned();
        d.shipping_address.city = "\u{200C}\u{2800}\u{0300}\u{1D173}".to_owned();
        assert_eq!(
            fields(&d),
            [
                "shipping_address.name",
                "shipping_address.line2",
                "shipping_address.city"
            ]
        );
        // Tag characters carry text nobody sees, even beside text that shows; in a flag
        // (England's) they are the flag's own.
        let mut d = draft();
        d.shipping_address.name = "Ada\u{E0041}\u{E0042}".to_owned();
        d.shipping_address.line1 = "1 Main St \u{1F3F4}\u{E0067}x".to_owned();
        d.shipping_address.city = "London \u{1F3F4}\u{E0067}\u{E0062}".to_owned();
        assert_eq!(
            fields(&d),
            [
                "shipping_address.name",
                "shipping_address.line1",
                "shipping_address.city"
            ]
        );
        let mut d = draft();
        d.shipping_address.city =
            "London \u{1F3F4}\u{E0067}\u{E0062}\u{E0065}\u{E006E}\u{E0067}\u{E007F}".to_owned();
        d.shipping_address.line2 = "—".to_owned();
        assert!(Details::parse(&d).is_ok(), "a flag, and a dash on line 2");
        // Joiners inside a name that shows are the name's own (a Persian name, an emoji).
        let mut d = draft();
        d.shipping_address.name = "Mehr\u{200C}dad \u{1F469}\u{200D}\u{1F52C}".to_owned();
        assert!(Details::parse(&d).is_ok());
    }

    #[test]
    fn an_email_domain_ends_in_a_real_top_level_label() {
        for wrong in [
            "ada@1.2",
            "ada@example.c",
            "ada@example.123",
            "ada@10.0.0.1",
        ] {
            let mut e = draft();
            e.email = wrong.to_owned();
            assert_eq!(fields(&e), ["email"], "{wrong}");
        }
        for right in [
            "ada@mail.example.co",
            "ada@1.example.com",
            "ada@example.xn--p1ai",
        ] {
            let mut e = draft();
            e.email = right.to_owned();
            assert!(Details::parse(&e).is_ok(), "{right}");
        }
    }

    #[test]
    fn bounds_are_counted_in_characters() {
        let mut d = draft();
        d.shipping_address.city = "é".repeat(MAX_LINE);
        assert!(Details::parse(&d).is_ok());
        d.shipping_address.city = "é".repeat(MAX_LINE + 1);
        assert_eq!(fields(&d), ["shipping_address.city"]);
    }

    #[test]
    fn a_draft_keeps_no_nul() {
        let mut d = draft();
        d.email = "ada\0@example.com".to_owned();
        assert_eq!(d.bounded().email, "ada@example.com");
    }

    #[test]
    fn a_bounded_draft_is_still_too_long() {
        let mut d = draft();
        d.shipping_address.city = "x".repeat(10_000);
        let bounded = d.bounded();
        assert_eq!(bounded.shipping_address.city.chars().count(), MAX_LINE + 1);
        assert_eq!(fields(&bounded), ["shipping_address.city"]);
    }

    #[test]
    fn an_address_reads_as_a_label() {
        let lines = draft().shipping_address.lines();
        assert_eq!(
            lines,
            [
                "Ada Lovelace",
                "12 St James's Square",
                "SW1Y 4JH London",
                "United Kingdom"
            ]
        );
    }
}
