//! A Qdrant server process on loopback, for tests, the demo and bench scripts: found
//! through `QDRANT_BIN` or a `qdrant` executable on `PATH`, started on free ports in a
//! directory of its own, stopped by its pid (and on drop).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the Qdrant binary is:
///
/// - the environment variable `QDRANT_BIN`, when set: that path if it is a file, else `None`
///   (a wrong `QDRANT_BIN` is not silently replaced by another binary);
/// - else the first `qdrant` on `PATH` that is an executable file;
/// - else `None`.
pub fn find_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("QDRANT_BIN") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join("qdrant"))
        .find(|p| is_executable(p))
}

/// Whether `p` is a file this process may execute (any execute bit on Unix).
fn is_executable(p: &Path) -> bool {
    let Ok(m) = std::fs::metadata(p) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        m.is_file() && m.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        m.is_file()
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One Qdrant node.
pub struct LocalQdrant {
    /// The Qdrant executable.
    pub binary: PathBuf,
    /// Directory of the node's storage, snapshots and `qdrant.log`.
    pub dir: PathBuf,
    /// Port of the HTTP API on 127.0.0.1.
    pub http_port: u16,
    /// Port of the gRPC API on 127.0.0.1.
    pub grpc_port: u16,
    child: Option<Child>,
}

impl LocalQdrant {
    /// Start a node with its storage under `dir` on free loopback ports and wait until its
    /// `/readyz` answers 200 and its gRPC port accepts connections (up to `wait`).
    pub fn start(binary: &Path, dir: &Path, wait: Duration) -> Result<LocalQdrant, String> {
        let mut q = LocalQdrant {
            binary: binary.to_path_buf(),
            dir: dir.to_path_buf(),
            http_port: free_port().map_err(|e| e.to_string())?,
            grpc_port: free_port().map_err(|e| e.to_string())?,
            child: None,
        };
        q.restart(wait)?;
        Ok(q)
    }

    /// gRPC URL (what `serve --qdrant-url` takes).
    pub fn grpc_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.grpc_port)
    }

    /// REST URL.
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// Process id of the running node (`None`: not running).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// (Re)start the process on the same ports and storage.
    pub fn restart(&mut self, wait: Duration) -> Result<(), String> {
        if self.child.is_some() {
            self.stop();
        }
        std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("qdrant.log"))
            .map_err(|e| e.to_string())?;
        let child = Command::new(&self.binary)
            .current_dir(&self.dir)
            .env("QDRANT__SERVICE__HOST", "127.0.0.1")
            .env("QDRANT__SERVICE__HTTP_PORT", self.http_port.to_string())
            .env("QDRANT__SERVICE__GRPC_PORT", self.grpc_port.to_string())
            .env("QDRANT__STORAGE__STORAGE_PATH", self.dir.join("storage"))
            .env(
                "QDRANT__STORAGE__SNAPSHOTS_PATH",
                self.dir.join("snapshots"),
            )
            .env("QDRANT__TELEMETRY_DISABLED", "true")
            .env("QDRANT__LOG_LEVEL", "WARN")
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
        self.child = Some(child);
        let t = Instant::now();
        loop {
            // REST can answer before the gRPC port listens: wait for both.
            if self.readyz() && TcpStream::connect(("127.0.0.1", self.grpc_port)).is_ok() {
                return Ok(());
            }
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(st)) = c.try_wait() {
                    self.child = None;
                    return Err(format!(
                        "qdrant exited with {st} (log: {})",
                        self.dir.join("qdrant.log").display()
                    ));
                }
            }
            if t.elapsed() > wait {
                self.stop();
                return Err(format!(
                    "qdrant was not ready within {} s (log: {})",
                    wait.as_secs(),
                    self.dir.join("qdrant.log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether `GET /readyz` answers 200.
    pub fn readyz(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.http_port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .is_err()
        {
            return false;
        }
        let mut buf = [0u8; 32];
        let n = s.read(&mut buf).unwrap_or(0);
        buf[..n].starts_with(b"HTTP/1.1 200")
    }

    /// Kill the process (SIGKILL by pid) and reap it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for LocalQdrant {
    fn drop(&mut self) {
        self.stop();
    }
}
