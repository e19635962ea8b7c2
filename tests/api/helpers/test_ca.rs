//! A certificate authority made by the test (rcgen): the CA of the TLS Postgres cluster and of
//! the TLS SMTP sink, and the server certificates it signs.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// A CA: its certificate (PEM) and what signs with it.
pub(crate) struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    pub(crate) fn new(name: &str) -> anyhow::Result<Self> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Ok(Self {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate()?)?,
        })
    }

    /// A certificate (PEM) and its key (PEM) for `names` (DNS names or IP addresses), with
    /// `common_name`.
    pub(crate) fn sign(
        &self,
        names: &[&str],
        common_name: &str,
    ) -> anyhow::Result<(String, String)> {
        let key = KeyPair::generate()?;
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// The CA's own certificate (PEM): what a client trusts.
    pub(crate) fn pem(&self) -> String {
        self.issuer.pem()
    }
}
