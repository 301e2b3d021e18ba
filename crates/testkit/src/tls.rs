//! Certificates for a TLS test server, generated when it starts: a throw-away
//! CA, a server certificate for `127.0.0.1` and `localhost`, and a client
//! certificate, all signed by that CA. No key material lives in the
//! repository; the files sit in the server's temporary directory and go with it.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The certificates of a TLS test server (see [`RedisServerBuilder::tls`]),
/// in PEM.
///
/// The server presents a certificate for `127.0.0.1` and `localhost` signed by
/// a CA made for it alone, so a client verifies it only when told to trust
/// [`ca_cert_pem`](Self::ca_cert_pem); a client that trusts only the system's
/// roots refuses it.
///
/// [`RedisServerBuilder::tls`]: crate::RedisServerBuilder::tls
#[derive(Clone)]
pub struct TlsCerts {
    ca_cert_pem: String,
    ca_cert_path: PathBuf,
    client_cert_pem: String,
    client_key_pem: String,
}

impl std::fmt::Debug for TlsCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsCerts")
            .field("ca_cert_path", &self.ca_cert_path)
            .finish_non_exhaustive()
    }
}

impl TlsCerts {
    /// The test CA's certificate: the one root to trust.
    pub fn ca_cert_pem(&self) -> &str {
        &self.ca_cert_pem
    }

    /// The file holding [`ca_cert_pem`](Self::ca_cert_pem) (for `SSL_CERT_FILE`
    /// or a `--tls-ca-cert-file`); removed with the server.
    pub fn ca_cert_path(&self) -> &Path {
        &self.ca_cert_path
    }

    /// A client certificate signed by the test CA, for a server started with
    /// [`tls_auth_clients`](crate::RedisServerBuilder::tls_auth_clients).
    pub fn client_cert_pem(&self) -> &str {
        &self.client_cert_pem
    }

    /// The private key of [`client_cert_pem`](Self::client_cert_pem).
    pub fn client_key_pem(&self) -> &str {
        &self.client_key_pem
    }

    /// As redis-rs takes them for `redis::Client::build_with_tls`: the test
    /// CA as the only root, and the client certificate when `client_cert`.
    pub fn redis_certificates(&self, client_cert: bool) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: client_cert.then(|| redis::ClientTlsConfig {
                client_cert: self.client_cert_pem.clone().into_bytes(),
                client_key: self.client_key_pem.clone().into_bytes(),
            }),
            root_cert: Some(self.ca_cert_pem.clone().into_bytes()),
        }
    }
}

/// Paths of the files redis-server reads.
#[derive(Debug, Clone)]
pub(crate) struct ServerFiles {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
    pub(crate) ca: PathBuf,
}

/// Generate the CA, server and client certificates and write what the server
/// needs into `dir`.
pub(crate) fn generate(dir: &Path) -> io::Result<(TlsCerts, ServerFiles)> {
    let err = |e: rcgen::Error| io::Error::other(format!("generating test certificates: {e}"));

    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "deadbolt-testkit CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let leaf = |names: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().map_err(err)?;
        let mut params = CertificateParams::new(names).map_err(err)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        Ok::<_, io::Error>((cert.pem(), key.serialize_pem()))
    };
    let (server_cert, server_key) = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        "deadbolt-testkit server",
        ExtendedKeyUsagePurpose::ServerAuth,
    )?;
    let (client_cert, client_key) = leaf(
        Vec::new(),
        "deadbolt-testkit client",
        ExtendedKeyUsagePurpose::ClientAuth,
    )?;

    let files = ServerFiles {
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
        ca: dir.join("ca.crt"),
    };
    let ca_pem = ca_cert.pem();
    fs::write(&files.cert, server_cert)?;
    fs::write(&files.key, server_key)?;
    fs::write(&files.ca, &ca_pem)?;
    let certs = TlsCerts {
        ca_cert_pem: ca_pem,
        ca_cert_path: files.ca.clone(),
        client_cert_pem: client_cert,
        client_key_pem: client_key,
    };
    Ok((certs, files))
}
