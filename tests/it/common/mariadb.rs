//! A MariaDB server of the test's own (Debian's `mariadb-server`, installed by `.ci/run`), in a sandbox: a fresh data directory, a socket and a loopback port; stopped and waited for when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Mariadb {
    child: Child,
    pub socket: PathBuf,
    pub port: u16,
}

impl Mariadb {
    /// Makes a data directory in `dir` and starts a server on it; root
    /// (in CI) runs it as root, as the server asks to be told.
    pub fn start(dir: &Path) -> Self {
        let data = dir.join("mariadb-data");
        // Temporary tables go to a directory of this server's own: with the
        // shared /tmp, two bootstraps at once (the suite runs four tests at a
        // time) sometimes took each other's `#sql-temptable-*` files and
        // failed with "Unknown table 'mysql.tmp_user_sys'".
        let tmp = dir.join("mariadb-tmp");
        std::fs::create_dir_all(&tmp).expect("a temporary directory for MariaDB");
        let root = unsafe { libc::geteuid() } == 0;
        let mut install = Command::new("mariadb-install-db");
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg("--auth-root-authentication-method=normal");
        if root {
            install.arg("--user=root");
        }
        let installed = install
            .output()
            .expect("mariadb-install-db runs (apt-get install mariadb-server)");
        assert!(
            installed.status.success(),
            "mariadb-install-db failed: {}",
            String::from_utf8_lossy(&installed.stdout)
        );
        let port = super::free_port();
        let socket = dir.join("mariadb.sock");
        let mut server = Command::new("mariadbd");
        server
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--tmpdir={}", tmp.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--port={port}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--pid-file={}", dir.join("mariadb.pid").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if root {
            server.arg("--user=root");
        }
        let child = server.spawn().expect("mariadbd starts");
        let db = Self {
            child,
            socket,
            port,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while db.sql("SELECT 1").is_err() {
            assert!(Instant::now() < deadline, "MariaDB did not come up in 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        db
    }

    /// Runs `sql` as root over the socket; its output, tab-separated.
    pub fn sql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new("mariadb")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["-u", "root", "-N", "-B", "-e", sql])
            .output()
            .map_err(|e| e.to_string())?;
        match out.status.success() {
            true => Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned()),
            false => Err(String::from_utf8_lossy(&out.stderr).to_string()),
        }
    }

    /// The shell command that adds one effect row (for an API of the test's own).
    pub fn insert_command(&self) -> String {
        format!(
            "mariadb --socket={} -u root app -e 'INSERT INTO effects VALUES ()'",
            self.socket.display()
        )
    }
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
