//! A throwaway Postgres cluster that accepts only TLS: `initdb` into a directory of its own
//! under the target directory, a free port on 127.0.0.1, `ssl = on` with a CA and a server
//! certificate made here (rcgen), and a `pg_hba.conf` of `hostssl` lines only (the role
//! `certuser` must show a client certificate the CA signed). The postmaster is stopped and the
//! directory removed on drop. Each test starts its own (a cluster takes a second or two).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use raptor_integration_tests::pg::{chown_postgres, initdb, pg_bindir, pg_tool};

use super::test_ca::Ca;

/// The role that signs in with a client certificate (`pg_hba.conf`: `cert`).
pub(crate) const CERT_USER: &str = "certuser";

/// The running cluster and its files.
pub(crate) struct TlsPg {
    pub(crate) port: u16,
    dir: PathBuf,
    data: PathBuf,
    bindir: PathBuf,
    /// The CA that signed the server's certificate.
    pub(crate) ca: PathBuf,
    /// Another CA, which signed nothing of this cluster.
    pub(crate) other_ca: PathBuf,
    /// A client certificate and key for [`CERT_USER`], signed by [`Self::ca`].
    pub(crate) client_cert: PathBuf,
    pub(crate) client_key: PathBuf,
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
}

fn private(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(())
}

impl TlsPg {
    /// Starts a cluster whose server certificate is valid for `server_names` only.
    pub(crate) fn start(server_names: &[&str]) -> anyhow::Result<Self> {
        let bindir = pg_bindir()?;
        let port = raptor_integration_tests::free_port()?;
        let dir = raptor_integration_tests::target_dir()?
            .join("tls-pg")
            .join(format!("{}-{port}", std::process::id()));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(dir.join("sock"))?;
        let data = dir.join("data");

        let ca = Ca::new("Raptor test CA")?;
        let other = Ca::new("Some other CA")?;
        let (server_cert, server_key) = ca.sign(server_names, "raptor test server")?;
        let (client_cert, client_key) = ca.sign(&[], CERT_USER)?;
        let files = dir.join("certs");
        std::fs::create_dir_all(&files)?;
        let this = Self {
            port,
            data: data.clone(),
            bindir,
            ca: files.join("ca.pem"),
            other_ca: files.join("other-ca.pem"),
            client_cert: files.join("client.pem"),
            client_key: files.join("client.key"),
            dir,
        };
        write(&this.ca, &ca.pem())?;
        write(&this.other_ca, &other.pem())?;
        write(&this.client_cert, &client_cert)?;
        write(&this.client_key, &client_key)?;
        private(&this.client_key)?;
        chown_postgres(&this.dir)?;
        let data_s = data.to_string_lossy().into_owned();
        initdb(&this.bindir, &data)?;
        // The server's files live in the data directory, owned by its user (0600 key).
        for (name, text) in [("server.crt", &server_cert), ("server.key", &server_key)] {
            let path = data.join(name);
            write(&path, text)?;
            private(&path)?;
        }
        std::fs::copy(&this.ca, data.join("root.crt"))?;
        write(
            &data.join("pg_hba.conf"),
            &format!(
                "local all all trust\n\
                 hostssl all {CERT_USER} 127.0.0.1/32 cert\n\
                 hostssl all all 127.0.0.1/32 trust\n\
                 hostssl all all ::1/128 trust\n"
            ),
        )?;
        let mut conf = std::fs::read_to_string(data.join("postgresql.conf"))?;
        conf.push_str(&format!(
            "\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n\
             ssl_ca_file = 'root.crt'\nport = {port}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\nmax_connections = 100\n\
             shared_buffers = 16MB\nfsync = off\n",
            this.dir.join("sock").display()
        ));
        write(&data.join("postgresql.conf"), &conf)?;
        chown_postgres(&data)?;
        let log = this.dir.join("log").to_string_lossy().into_owned();
        let out = pg_tool(
            &this.bindir,
            "pg_ctl",
            &["-D", &data_s, "-l", &log, "-w", "-t", "60", "start"],
        )?;
        if !out.status.success() {
            bail!(
                "pg_ctl start failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        // The role of the client certificate (over the socket: hostssl is TCP only).
        let sock = this.dir.join("sock").to_string_lossy().into_owned();
        let port_s = port.to_string();
        let out = pg_tool(
            &this.bindir,
            "psql",
            &[
                "-h",
                &sock,
                "-p",
                &port_s,
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-c",
                &format!("create role {CERT_USER} login superuser"),
            ],
        )?;
        if !out.status.success() {
            bail!(
                "create role {CERT_USER} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(this)
    }

    /// A URL of database `raptor` on this cluster as `postgres`, by `host`, with `query`.
    pub(crate) fn url(&self, host: &str, query: &str) -> String {
        format!("postgres://postgres@{host}:{}/raptor?{query}", self.port)
    }

    /// `verify-full` with the right CA, by 127.0.0.1.
    pub(crate) fn verified_url(&self) -> String {
        self.url(
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={}", self.ca.display()),
        )
    }
}

impl Drop for TlsPg {
    fn drop(&mut self) {
        let data = self.data.to_string_lossy().into_owned();
        let _ = pg_tool(
            &self.bindir,
            "pg_ctl",
            &["-D", &data, "-m", "immediate", "-w", "-t", "60", "stop"],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
