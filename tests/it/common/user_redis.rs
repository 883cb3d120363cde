//! A Redis that stands for a user's: a `redis-server` the test starts on a TCP port of loopback with a password, seeded with keys of "the app's", killed when the test ends.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The password the server asks for; a test checks idem never prints it.
pub const PASSWORD: &str = "user-redis-s3cret";

pub struct UserRedis {
    child: Child,
    pub port: u16,
}

impl UserRedis {
    /// Starts the server with its data directory in `dir`, or `None` when
    /// this machine has no `redis-server`.
    pub fn start(dir: &Path) -> Option<Self> {
        let program = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
            .into_iter()
            .find(|p| Path::new(p).is_file())?;
        // A free port: bound, read, let go, then given to the server.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = Command::new(program);
        // SAFETY: prctl is async-signal-safe, and only sets this child's
        // parent-death signal: a test process that aborts (a stack
        // overflow, a panic in a drop) takes its server with it.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = command
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--requirepass",
                PASSWORD,
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.connection().is_err() {
            assert!(Instant::now() < deadline, "the user's Redis did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }

    /// The URL a user would give idem.
    pub fn url(&self) -> String {
        format!("redis://:{PASSWORD}@127.0.0.1:{}", self.port)
    }

    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let mut conn = client.get_connection_with_timeout(Duration::from_secs(2))?;
        redis::cmd("PING").query::<String>(&mut conn)?;
        Ok(conn)
    }

    /// Every key with its value and time to live (ms; -1: none).
    pub fn keys(&self) -> Vec<(String, String, i64)> {
        let mut conn = self.connection().unwrap();
        let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
        keys.sort();
        keys.into_iter()
            .map(|key| {
                let value: Option<String> = redis::cmd("GET").arg(&key).query(&mut conn).unwrap();
                let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn).unwrap();
                (key, value.unwrap_or_default(), ttl)
            })
            .collect()
    }

    pub fn set(&self, key: &str, value: &str) {
        let mut conn = self.connection().unwrap();
        redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query::<()>(&mut conn)
            .unwrap();
    }
}

impl Drop for UserRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
