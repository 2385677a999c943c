//! Verifying a callback's signature header, `t=<unix seconds>,v1=<hex HMAC-SHA256 of
//! "t.body">` (the sandbox's `Once-Signature` and Stripe's `Stripe-Signature` alike; other
//! entries, such as Stripe's `v0`, are ignored): within
//! 300 s of now (either way), compared in constant time, against every accepted secret (so
//! a secret can be rotated without losing callbacks).
//!
//! The cost is bounded whatever the header holds: the header is at most [`MAX_HEADER_BYTES`]
//! with at most [`MAX_SIGNATURES`] `v1=` entries (more is malformed, refused before any MAC
//! is computed), and one MAC is computed per accepted secret, then compared with each entry.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

pub const TOLERANCE_SECS: u64 = 300;
/// A provider signs with one secret, two while it rotates; a few more are tolerated.
pub const MAX_SIGNATURES: usize = 4;
pub const MAX_HEADER_BYTES: usize = 512;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("the signature header is missing")]
    Missing,
    #[error("the signature header is malformed")]
    Malformed,
    #[error("the signature's timestamp is more than 300 seconds away from now")]
    Stale,
    #[error("the signature does not match")]
    Mismatch,
}

pub fn verify(
    header: Option<&str>,
    body: &[u8],
    secrets: &[String],
    now: i64,
) -> Result<(), SignatureError> {
    let header = header.ok_or(SignatureError::Missing)?;
    let (timestamp, signatures) = parse(header)?;
    // abs_diff cannot overflow, whatever timestamp the header claims.
    if now.abs_diff(timestamp) > TOLERANCE_SECS {
        return Err(SignatureError::Stale);
    }
    let mut matched = false;
    for secret in secrets {
        let expected = mac(secret, timestamp, body);
        for signature in &signatures {
            matched |= bool::from(expected.as_slice().ct_eq(signature.as_slice()));
        }
    }
    if matched {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

fn mac(secret: &str, timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

/// `t=…` and every `v1=…` of the header, within the size limits.
fn parse(header: &str) -> Result<(i64, Vec<Vec<u8>>), SignatureError> {
    if header.len() > MAX_HEADER_BYTES {
        return Err(SignatureError::Malformed);
    }
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = Some(t.parse().map_err(|_| SignatureError::Malformed)?),
            Some(("v1", hex_sig)) if signatures.len() < MAX_SIGNATURES => {
                signatures.push(hex::decode(hex_sig).map_err(|_| SignatureError::Malformed)?)
            }
            Some(("v1", _)) => return Err(SignatureError::Malformed),
            _ => {}
        }
    }
    match (timestamp, signatures.is_empty()) {
        (Some(t), false) => Ok((t, signatures)),
        _ => Err(SignatureError::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &str, t: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{t}.").as_bytes());
        mac.update(body);
        format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
    }

    #[test]
    fn a_valid_signature_from_any_accepted_secret_passes() {
        let secrets = vec!["old".to_owned(), "new".to_owned()];
        assert_eq!(
            verify(Some(&sign("new", 1000, b"{}")), b"{}", &secrets, 1000),
            Ok(())
        );
        assert_eq!(
            verify(Some(&sign("old", 1000, b"{}")), b"{}", &secrets, 1299),
            Ok(())
        );
    }

    #[test]
    fn tampering_wrong_secrets_and_stale_timestamps_fail() {
        let secrets = vec!["s".to_owned()];
        assert_eq!(
            verify(Some(&sign("s", 1000, b"{}")), b"{ }", &secrets, 1000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(Some(&sign("x", 1000, b"{}")), b"{}", &secrets, 1000),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify(Some(&sign("s", 1000, b"{}")), b"{}", &secrets, 1301),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(Some(&sign("s", 1301, b"{}")), b"{}", &secrets, 1000),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify(None, b"{}", &secrets, 1000),
            Err(SignatureError::Missing)
        );
        assert_eq!(
            verify(Some("t=abc,v1=00"), b"{}", &secrets, 1000),
            Err(SignatureError::Malformed)
        );
        assert_eq!(
            verify(Some("t=1000"), b"{}", &secrets, 1000),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn a_header_stuffed_with_entries_is_refused_before_any_mac() {
        let secrets = vec!["s".to_owned()];
        let good = sign("s", 1000, b"{}");
        let one_too_many = format!("{good}{}", ",v1=00".repeat(MAX_SIGNATURES));
        assert!(one_too_many.len() <= MAX_HEADER_BYTES);
        assert_eq!(
            verify(Some(&one_too_many), b"{}", &secrets, 1000),
            Err(SignatureError::Malformed)
        );
        let huge = format!("{good}{}", ",x=1".repeat(200));
        assert_eq!(
            verify(Some(&huge), b"{}", &secrets, 1000),
            Err(SignatureError::Malformed)
        );
        // Up to the cap, a genuine entry among decoys still passes.
        let decoys = format!("{},v1=00,v1=ff", good);
        assert_eq!(verify(Some(&decoys), b"{}", &secrets, 1000), Ok(()));
    }

    #[test]
    fn extreme_timestamps_are_stale_not_an_overflow() {
        let secrets = vec!["s".to_owned()];
        for t in [i64::MIN, i64::MAX] {
            assert_eq!(
                verify(Some(&sign("s", t, b"{}")), b"{}", &secrets, 1000),
                Err(SignatureError::Stale)
            );
        }
        assert_eq!(
            verify(Some(&sign("s", 1000, b"{}")), b"{}", &secrets, i64::MIN),
            Err(SignatureError::Stale)
        );
    }
}
