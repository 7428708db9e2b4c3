//! What the controller's tests share: a directory of files removed on drop, and a
//! `lockstep ctl serve` on port 0 that says where it listens, killed on drop.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// How long a server may take to say where it listens.
const START_GUARD: Duration = Duration::from_secs(120);

/// A directory with the given files, unique per process and call, removed on drop.
pub struct CtlDir(PathBuf);

impl CtlDir {
    pub fn new(tag: &str, files: &[(&str, &str)]) -> CtlDir {
        static RUN: AtomicUsize = AtomicUsize::new(0);
        let n = RUN.fetch_add(1, Ordering::SeqCst);
        let name = format!("lockstep-ctl-{tag}-{}-{n}", std::process::id());
        let p = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        for (file, text) in files {
            std::fs::write(p.join(file), text).unwrap();
        }
        CtlDir(p)
    }

    pub fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for CtlDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `lockstep ctl serve`, killed on drop.
pub struct CtlServer {
    pub child: Child,
    /// `http://127.0.0.1:PORT`, as the server printed it.
    pub url: String,
    _log: mpsc::Receiver<String>,
}

impl CtlServer {
    /// `lockstep ctl serve --listen 127.0.0.1:0 ARGS`; returns once it listens.
    pub fn spawn(args: &[OsString]) -> CtlServer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(["ctl", "serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // read to the end: a full pipe would block the server
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        let url = loop {
            match rx.recv_timeout(START_GUARD) {
                Ok(line) => {
                    if let Some(i) = line.find("listening on ") {
                        break line[i + "listening on ".len()..].trim().to_string();
                    }
                    seen.push(line);
                }
                Err(e) => {
                    let _ = child.kill();
                    let status = child.wait();
                    panic!("the server did not start ({e}, {status:?}): {seen:?}");
                }
            }
        };
        CtlServer {
            child,
            url,
            _log: rx,
        }
    }
}

impl Drop for CtlServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
