//! Proof that a server is a disposable cluster of idem's: a token idem wrote into the cluster's data directory when it made it, read back over the connection.
//!
//! A guard file's statements are someone else's code, and idem runs them
//! only on a cluster it can prove is its own. A path's name proves nothing:
//! anyone can start a server whose socket sits in a directory named like
//! idem's run directories. So when idem makes a cluster it writes a fresh
//! random token into the cluster's data directory ([`mark`]) and keeps it.
//! The token reaches another process only from the idem that made the
//! cluster, in the environment it starts that process with
//! ([`TOKEN_VAR`]: `idem db -- COMMAND`, which `idem db` alone prints
//! beside the URL, and app replicas). A process that reaches a server by
//! its URL counts it as idem's only when ([`prove`]) the server, asked
//! over the connection, says that its data directory is the one beside
//! the URL's socket and that the token in it is the one idem was handed
//! (`pg_read_file`, which only a superuser may call). A server nobody
//! handed a token for, or whose data directory holds another, is the
//! user's.

use std::path::Path;

use anyhow::Result;
use sqlx::PgConnection;

use super::book;

/// The token's file, in the cluster's data directory.
pub const TOKEN_FILE: &str = "idem-cluster-token";

/// The variable that hands a cluster's token to a process idem starts.
pub const TOKEN_VAR: &str = "IDEM_CLUSTER_TOKEN";

/// Writes a fresh token into `data`, a cluster's data directory that idem
/// just made (never over a file that is there), and returns it.
pub fn mark(data: &Path) -> Result<String> {
    let token = uuid::Uuid::new_v4().simple().to_string();
    let path = data.join(TOKEN_FILE);
    if !crate::files::write::create_new(&path, token.as_bytes(), "the cluster's token")? {
        anyhow::bail!(
            "{} is there already in a cluster idem just made",
            path.display()
        );
    }
    Ok(token)
}

/// The token this process was handed, if it was handed one of the right
/// shape (32 hexadecimal digits).
pub fn handed() -> Option<String> {
    std::env::var(TOKEN_VAR)
        .ok()
        .filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether the server `conn` reaches is the cluster whose socket is in
/// `socket_dir`, made by idem, holding `token` (see the module's notes).
/// Any failure to prove it is `false`, never an error: idem then treats
/// the server as the user's.
pub async fn prove(conn: &mut PgConnection, socket_dir: &Path, token: &str) -> bool {
    let Ok(data) = std::fs::canonicalize(socket_dir.join("data")) else {
        return false;
    };
    let said: Result<(String, String), _> =
        book::query_as("SELECT current_setting('data_directory'), pg_read_file($1)")
            .bind(TOKEN_FILE)
            .fetch_one(&mut *conn)
            .await;
    let Ok((server_data, server_token)) = said else {
        return false;
    };
    let same_dir = std::fs::canonicalize(&server_data).is_ok_and(|d| d == data);
    same_dir && server_token.trim() == token
}
