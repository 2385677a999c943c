//! Secrets, compared and hashed: the operator password (plain or an argon2 hash), the
//! metrics token, random secrets. Nothing here knows the shop; the console (`operator::auth`),
//! the configuration and `/metrics` use it.

use argon2::{
    password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString},
    Argon2,
};
use rand::distr::{Alphanumeric, SampleString};
use rand::Rng;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Whether `given` is the secret `expected` (a password, a token): compared as SHA-256
/// digests in constant time.
pub fn secret_matches(expected: &str, given: &str) -> bool {
    let (a, b) = (
        Sha256::digest(expected.as_bytes()),
        Sha256::digest(given.as_bytes()),
    );
    a.ct_eq(&b).into()
}

/// Whether `given` is the password whose argon2 PHC string is `phc`.
pub fn hash_matches(phc: &str, given: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(given.as_bytes(), &hash)
            .is_ok()
    })
}

/// The argon2id PHC string of `password`, with a random salt and argon2's default costs
/// (`server hash-password`).
pub fn hash_password(password: &str) -> anyhow::Result<String> {
    let mut salt = [0u8; 16];
    rand::rng().fill(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| anyhow::anyhow!("salt: {e}"))?;
    let hash = Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| anyhow::anyhow!("hashing: {e}"))?;
    Ok(hash.to_string())
}

/// Whether `phc` is a hash the login can check: an argon2 PHC string with a hash and
/// costs argon2 accepts. The server refuses to start with any other, rather than refuse
/// every login.
pub fn check_password_hash(phc: &str) -> Result<(), String> {
    let hash = PasswordHash::new(phc).map_err(|e| e.to_string())?;
    argon2::Algorithm::try_from(hash.algorithm).map_err(|e| e.to_string())?;
    argon2::Params::try_from(&hash).map_err(|e| e.to_string())?;
    match hash.hash {
        Some(_) => Ok(()),
        None => Err("it holds no hash".into()),
    }
}

/// A random secret: the generated password, or a CSRF token.
pub fn random_secret(len: usize) -> String {
    Alphanumeric.sample_string(&mut rand::rng(), len)
}
