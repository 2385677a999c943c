//! One process of the deployment: started from a command line and an environment, and
//! killed, paused and started again at the harness's will. Output goes to a log file of its
//! own under the run's directory, appended across restarts.

use std::{fs::OpenOptions, path::Path, process::Stdio, time::Duration};

use tokio::process::{Child, Command};

pub struct Process {
    pub name: String,
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: std::path::PathBuf,
    child: Option<Child>,
    paused: bool,
}

impl Process {
    pub fn new(
        name: &str,
        program: &str,
        args: &[&str],
        env: Vec<(String, String)>,
        dir: &Path,
    ) -> Self {
        Self {
            name: name.to_owned(),
            program: program.to_owned(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env,
            log: dir.join(format!("{name}.log")),
            child: None,
            paused: false,
        }
    }

    pub fn start(&mut self) -> anyhow::Result<()> {
        if let Some(dir) = self.log.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.program)
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", self.name))?;
        self.child = Some(child);
        self.paused = false;
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let _ = std::process::Command::new("kill")
                .args([signal, &pid.to_string()])
                .status();
        }
    }

    /// SIGKILL: no chance to finish anything, as in a crash or an OOM kill.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.paused {
                self.signal("-CONT");
            }
            let _ = child.kill().await;
        }
        self.paused = false;
    }

    /// SIGKILL to the process and every process under it, as when the machine they run on
    /// dies: a PostgreSQL node is a keeper, its supervisor, the postmaster and its backends
    /// (which leave the process group, so the tree is read from /proc).
    /// Returns once every one of them is gone: a keeper started again while its killed
    /// predecessor still shows in /proc (not yet reaped) finds its pidfile "in use" and
    /// refuses to run.
    pub async fn kill_tree(&mut self) {
        let pids = self.pid().map(descendants).unwrap_or_default();
        let args: Vec<String> = pids.iter().map(u32::to_string).collect();
        // Some may be gone already (a backend that just ended): not worth a word.
        let _ = std::process::Command::new("kill")
            .arg("-KILL")
            .args(&args)
            .stderr(Stdio::null())
            .status();
        self.kill().await;
        for _ in 0..100 {
            if !pids
                .iter()
                .any(|p| Path::new(&format!("/proc/{p}")).exists())
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGSTOP: the process holds its connections and leases but does nothing, like a long
    /// garbage-collection pause or a frozen VM.
    pub fn pause(&mut self) {
        self.signal("-STOP");
        self.paused = true;
    }

    pub fn resume(&mut self) {
        self.signal("-CONT");
        self.paused = false;
    }

    /// Starts the process again if it has exited by itself (it should not have).
    pub fn restart_if_exited(&mut self) -> anyhow::Result<bool> {
        let exited = match self.child.as_mut() {
            Some(child) => child.try_wait()?.is_some(),
            None => true,
        };
        if exited {
            self.start()?;
        }
        Ok(exited)
    }

    /// SIGTERM, then SIGKILL if it has not stopped after `grace`.
    pub async fn stop(&mut self, grace: Duration) {
        if self.paused {
            self.resume();
        }
        self.signal("-TERM");
        if let Some(mut child) = self.child.take() {
            if tokio::time::timeout(grace, child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
        }
    }
}

/// Runs a shell command line given by the caller (how this machine starts and stops a
/// PostgreSQL cluster differs: as root it runs as the postgres user).
pub async fn shell(command: &str) -> anyhow::Result<()> {
    let status = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await?;
    anyhow::ensure!(status.success(), "`{command}` failed: {status}");
    Ok(())
}

/// `root` and every process descended from it, read from /proc.
fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // "pid (comm) state ppid …": the name may hold spaces, so read after its ')'.
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found
}
