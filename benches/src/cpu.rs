//! CPU time per operation: what a phase cost the servers kura-load started and kura-load itself.
//!
//! On a machine where the client and the server share the cores, a rate alone does not say
//! which side ran out of CPU, nor what one answer costs the server. A phase therefore reads the
//! CPU time (user + system, every thread, the ended ones included) of each process it knows
//! the PID of, before its first request and after its last answer, and divides the difference
//! by the operations it completed. The servers are known only when kura-load started them
//! (`--spawn-server`, the ceiling); a server restarted during the phase (`--kill-after`) is a
//! new process, and the phase then reports no server figure rather than half of one.
//!
//! Source: `/proc/PID/stat` fields 14 and 15 (`utime`, `stime`, in clock ticks; proc(5)).
//! Linux only: elsewhere every reading is `None`.

use serde::{Deserialize, Serialize};

/// A phase's CPU time per completed operation, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuPerOp {
    /// The servers the phase drove, summed; `None` when kura-load did not start them (or one
    /// was restarted during the phase).
    pub server_us: Option<f64>,
    /// kura-load itself (every client thread).
    pub client_us: f64,
}

/// CPU time of a set of processes and of this one, read at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSample {
    /// Per server PID, seconds of CPU; `None` for a PID that could not be read.
    servers: Vec<(u32, Option<f64>)>,
    client: Option<f64>,
}

impl CpuSample {
    /// Read the CPU time of `server_pids` and of this process now.
    pub fn take(server_pids: &[u32]) -> CpuSample {
        CpuSample {
            servers: server_pids
                .iter()
                .map(|&pid| (pid, process_cpu_secs(pid)))
                .collect(),
            client: process_cpu_secs(std::process::id()),
        }
    }

    /// The CPU per operation between `self` and the later sample `after`, over `ops`
    /// operations; `None` without operations or without a reading of this process.
    pub fn per_op(&self, after: &CpuSample, ops: u64) -> Option<CpuPerOp> {
        if ops == 0 {
            return None;
        }
        let per_op = |secs: f64| secs * 1e6 / ops as f64;
        let client = per_op(after.client? - self.client?);
        let server = if self.servers.is_empty() {
            None
        } else {
            self.servers
                .iter()
                .zip(&after.servers)
                .map(|((p0, t0), (p1, t1))| {
                    // A later reading below the earlier one is another process under a reused PID.
                    let d = (*t1)? - (*t0)?;
                    (p0 == p1 && d >= 0.0).then_some(d)
                })
                .sum::<Option<f64>>()
                .map(per_op)
        };
        Some(CpuPerOp {
            server_us: server,
            client_us: client,
        })
    }
}

/// Seconds of CPU (user + system, all threads) process `pid` has used, from `/proc/PID/stat`.
pub fn process_cpu_secs(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let ticks = parse_stat_ticks(&text)?;
    Some(ticks as f64 / clock_ticks_per_second()? as f64)
}

/// `utime + stime` of a `/proc/PID/stat` line, in clock ticks. The command name (field 2) is in
/// parentheses and may hold spaces and parentheses itself: fields are counted after its last
/// `)`, where field 3 is the first.
fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace().skip(14 - 3);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(target_os = "linux")]
fn clock_ticks_per_second() -> Option<u64> {
    Some(rustix::param::clock_ticks_per_second()).filter(|&t| t > 0)
}

#[cfg(not(target_os = "linux"))]
fn clock_ticks_per_second() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_ticks_are_user_plus_system_counted_after_the_command_name() {
        // A command name holding spaces and a ')' must not shift the fields.
        let line = "4242 (kura (x) y) S 1 4242 4242 0 -1 4194560 2000 0 0 0 \
                    1234 567 0 0 20 0 14 0 100 0 0 18446744073709551615";
        assert_eq!(parse_stat_ticks(line), Some(1234 + 567));
        assert_eq!(parse_stat_ticks("4242 (kura) S 1 2"), None);
        assert_eq!(parse_stat_ticks("no parenthesis here"), None);
    }

    #[test]
    fn this_process_reads_its_own_cpu_time() {
        let before = process_cpu_secs(std::process::id());
        if cfg!(target_os = "linux") {
            let t0 = before.expect("/proc/self/stat");
            // Spin until the kernel has charged at least one more tick (10 ms at 100 Hz).
            let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
            let mut x = 0u64;
            while process_cpu_secs(std::process::id()).unwrap() <= t0 {
                assert!(
                    std::time::Instant::now() < give_up,
                    "CPU time never advanced"
                );
                for i in 0..100_000u64 {
                    x = x.wrapping_mul(31).wrapping_add(i);
                }
                std::hint::black_box(x);
            }
        } else {
            assert_eq!(before, None);
        }
    }

    #[test]
    fn per_op_divides_each_side_and_refuses_a_changed_server() {
        let at = |server: Option<f64>, pid: u32, client: f64| CpuSample {
            servers: vec![(pid, server)],
            client: Some(client),
        };
        let r = at(Some(1.0), 7, 2.0)
            .per_op(&at(Some(1.5), 7, 2.25), 50_000)
            .unwrap();
        assert!((r.server_us.unwrap() - 10.0).abs() < 1e-9);
        assert!((r.client_us - 5.0).abs() < 1e-9);
        // A server that exited (no reading) or went backwards (another process) has no figure.
        let gone = at(Some(1.0), 7, 2.0)
            .per_op(&at(None, 7, 2.25), 10)
            .unwrap();
        assert_eq!(gone.server_us, None);
        let reused = at(Some(9.0), 7, 2.0)
            .per_op(&at(Some(1.0), 7, 2.25), 10)
            .unwrap();
        assert_eq!(reused.server_us, None);
        assert_eq!(
            at(Some(1.0), 7, 2.0).per_op(&at(Some(2.0), 7, 3.0), 0),
            None
        );
        // Without servers, the client's figure alone.
        let none = CpuSample {
            servers: vec![],
            client: Some(1.0),
        };
        let r = none
            .per_op(
                &CpuSample {
                    servers: vec![],
                    client: Some(1.1),
                },
                1_000,
            )
            .unwrap();
        assert_eq!(r.server_us, None);
        assert!((r.client_us - 100.0).abs() < 1e-6);
    }
}
