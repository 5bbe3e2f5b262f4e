//! `--secrets-dir DIR`: the CA, the serving certificate and Kyverno's token kept between runs.
//!
//! Without it every run makes a new CA, key and token, so a GitOps repository holding the
//! output churns on each run. With it the first run writes them to DIR and later runs read
//! them, so the same inputs print the same manifests. The CA is what every engine holds (the
//! Provider's and the policies' `caBundle`, the webhook's): it is never replaced here. The
//! serving certificate is issued again from it when it no longer names the server (another
//! `--namespace` or `--url`) or expires within 30 days, and the run says so.

use crate::terminal::print_note;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rcgen::{Issuer, KeyPair};

use super::{TlsMaterial, issue_serving_certificate, make_certificates, random_token};

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const SERVING_CERT: &str = "tls.crt";
const SERVING_KEY: &str = "tls.key";
const KYVERNO_TOKEN: &str = "kyverno-token";
/// A kept serving certificate closer than this to its end is issued again.
const RENEW_BEFORE: Duration = Duration::from_secs(30 * 24 * 3600);

/// The CA and serving certificate for `names`: made now, or kept in `dir`.
pub fn certificates(dir: Option<&Path>, names: &[String]) -> Result<TlsMaterial, String> {
    let Some(dir) = dir else {
        return make_certificates(names);
    };
    let file = |name: &str| dir.join(name);
    let (ca_cert, ca_key) = (read(&file(CA_CERT))?, read(&file(CA_KEY))?);
    let (ca_pem, ca_key_pem) = match (ca_cert, ca_key) {
        (Some(cert), Some(key)) => (cert, key),
        (None, None) => {
            let made = make_certificates(names)?;
            create_dir(dir)?;
            write(&file(CA_KEY), &made.ca_key_pem, true)?;
            write(&file(CA_CERT), &made.ca_pem, false)?;
            write(&file(SERVING_KEY), &made.key_pem, true)?;
            write(&file(SERVING_CERT), &made.cert_pem, false)?;
            print_note(format_args!(
                "wrote a new CA and serving certificate to {}; later runs with \
                 --secrets-dir {} print the same ones (keep the folder as you keep Secrets)",
                dir.display(),
                dir.display()
            ));
            return Ok(made);
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(format!(
                "--secrets-dir {}: {CA_CERT} and {CA_KEY} go together, and only one of them is \
                 there; restore the other, or empty the folder to make a new CA (every engine \
                 must then be given the new caBundle)",
                dir.display()
            ));
        }
    };
    let ca_key = KeyPair::from_pem(&ca_key_pem).map_err(|error| {
        format!(
            "{}: not a private key in PEM: {error}",
            file(CA_KEY).display()
        )
    })?;
    if public_key_of_certificate(&ca_pem).as_deref() != Some(ca_key.public_key_raw()) {
        return Err(format!(
            "{}: not the key of {} (or that is not a certificate in PEM); restore the pair",
            file(CA_KEY).display(),
            file(CA_CERT).display()
        ));
    }
    let issuer = Issuer::from_ca_cert_pem(&ca_pem, ca_key).map_err(|error| {
        format!(
            "{}: not a CA certificate in PEM: {error}",
            file(CA_CERT).display()
        )
    })?;

    let serving = (read(&file(SERVING_CERT))?, read(&file(SERVING_KEY))?);
    if let (Some(cert_pem), Some(key_pem)) = &serving {
        match why_not_reusable(cert_pem, key_pem, &ca_pem, names) {
            None => {
                return Ok(TlsMaterial {
                    ca_pem,
                    ca_key_pem,
                    cert_pem: cert_pem.clone(),
                    key_pem: key_pem.clone(),
                });
            }
            Some(reason) => print_note(format_args!(
                "{}: {reason}: issued again from the kept CA (the caBundle is \
                 unchanged)",
                file(SERVING_CERT).display()
            )),
        }
    }
    let (cert_pem, key_pem) = issue_serving_certificate(&issuer, names)?;
    // The key first: a certificate never sits beside a key that is not its own.
    write(&file(SERVING_KEY), &key_pem, true)?;
    write(&file(SERVING_CERT), &cert_pem, false)?;
    Ok(TlsMaterial {
        ca_pem,
        ca_key_pem,
        cert_pem,
        key_pem,
    })
}

/// Kyverno's bearer token: made now, or kept in `dir`.
pub fn kyverno_token(dir: Option<&Path>) -> Result<String, String> {
    let Some(dir) = dir else {
        return random_token();
    };
    let path = dir.join(KYVERNO_TOKEN);
    if let Some(kept) = read(&path)? {
        let token = kept.trim();
        if token.len() < 32 || !token.bytes().all(|byte| byte.is_ascii_graphic()) {
            return Err(format!(
                "{}: a token of at least 32 printable characters without spaces is needed \
                 (delete the file to have one made)",
                path.display()
            ));
        }
        return Ok(token.to_string());
    }
    let token = random_token()?;
    create_dir(dir)?;
    write(&path, &format!("{token}\n"), true)?;
    Ok(token)
}

/// The public key a PEM certificate carries, as rcgen's `public_key_raw` gives a key pair's.
fn public_key_of_certificate(cert_pem: &str) -> Option<Vec<u8>> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&pem.contents).ok()?;
    Some(cert.public_key().subject_public_key.data.to_vec())
}

/// Why the kept serving certificate and key cannot serve `names` under this CA, if they cannot.
fn why_not_reusable(
    cert_pem: &str,
    key_pem: &str,
    ca_pem: &str,
    names: &[String],
) -> Option<String> {
    let key = KeyPair::from_pem(key_pem).ok();
    if key.as_ref().map(KeyPair::public_key_raw) != public_key_of_certificate(cert_pem).as_deref() {
        return Some(format!("{SERVING_KEY} is not its key"));
    }
    let der = |pem_text: &str| {
        x509_parser::pem::parse_x509_pem(pem_text.as_bytes())
            .ok()
            .map(|(_, pem)| pem.contents)
    };
    let (Some(cert_der), Some(ca_der)) = (der(cert_pem), der(ca_pem)) else {
        return Some("not a certificate in PEM".into());
    };
    let (Ok((_, cert)), Ok((_, ca))) = (
        x509_parser::parse_x509_certificate(&cert_der),
        x509_parser::parse_x509_certificate(&ca_der),
    ) else {
        return Some("not a certificate in PEM".into());
    };
    if cert.issuer() != ca.subject() || cert.verify_signature(Some(ca.public_key())).is_err() {
        return Some("not issued by the kept CA".into());
    }
    let named: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(extension)) => extension
            .value
            .general_names
            .iter()
            .filter_map(general_name_text)
            .collect(),
        _ => Vec::new(),
    };
    // An IP address compares as an address: `--url https://[::1]` names `::1` however written.
    let canonical = |name: &str| {
        name.parse::<std::net::IpAddr>()
            .map_or_else(|_| name.to_ascii_lowercase(), |address| address.to_string())
    };
    let named: Vec<String> = named.iter().map(|name| canonical(name)).collect();
    if let Some(missing) = names.iter().find(|name| !named.contains(&canonical(name))) {
        return Some(format!("it does not name {missing}"));
    }
    let ends = cert.validity().not_after.timestamp();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    if ends - now < RENEW_BEFORE.as_secs() as i64 {
        return Some("it expires within 30 days".into());
    }
    None
}

/// A DNS name as written, an IP address as `install` names it (`--url https://10.0.0.1`).
fn general_name_text(name: &x509_parser::extensions::GeneralName) -> Option<String> {
    use x509_parser::extensions::GeneralName;
    match name {
        GeneralName::DNSName(dns) => Some(dns.to_string()),
        GeneralName::IPAddress(bytes) => match bytes.len() {
            4 => <[u8; 4]>::try_from(*bytes)
                .ok()
                .map(|octets| std::net::IpAddr::from(octets).to_string()),
            16 => <[u8; 16]>::try_from(*bytes)
                .ok()
                .map(|octets| std::net::IpAddr::from(octets).to_string()),
            _ => None,
        },
        _ => None,
    }
}

fn read(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(format!("{}: {error}", path.display())),
    }
}

fn create_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|error| format!("--secrets-dir {}: {error}", dir.display()))
}

/// Writes `text` to `path`; a private key or token readable by its owner only.
fn write(path: &PathBuf, text: &str, private: bool) -> Result<(), String> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let written = options.open(path).and_then(|mut file| {
        file.write_all(text.as_bytes())?;
        // `mode` applies only when the file is created: an existing one is narrowed too.
        #[cfg(unix)]
        if private {
            use std::os::unix::fs::PermissionsExt as _;
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        Ok(())
    });
    written.map_err(|error| format!("{}: {error}", path.display()))
}
