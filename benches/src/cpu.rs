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
//! A server's CPU is also split by thread: its request threads (actix's, named
//! [`REQUEST_THREADS`]: the HTTP workers, and the regions that run on them by default, or on
//! arbiters of their own) against the rest (flushes, compactions, log syncs, freeing), so that
//! a slower phase tells whether serving a request got dearer or the background took the CPU.
//!
//! The whole machine is read too: how many of its cores were busy during the phase, how much
//! of that the hypervisor took (steal), and what the other processes and the kernel's own
//! threads cost per operation (busy time minus the processes above: `others_us`, reported as
//! *the rest*). On a shared machine a rate that dropped while the rest rose was taken by a
//! neighbour (a kernel thread reclaiming memory, the writeback of files written earlier,
//! another tenant), not by Kura.
//!
//! Sources: `/proc/PID/stat` and `/proc/PID/task/TID/stat` fields 14 and 15 (`utime`,
//! `stime`, in clock ticks) and the `cpu` lines of `/proc/stat` (proc(5)). Linux only:
//! elsewhere every reading is `None`.

use serde::{Deserialize, Serialize};

/// A phase's CPU time per completed operation, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuPerOp {
    /// The servers the phase drove, summed; `None` when kura-load did not start them (or one
    /// was restarted during the phase).
    pub server_us: Option<f64>,
    /// Of `server_us`, the servers' request threads ([`REQUEST_THREADS`]); the rest of it is
    /// their background threads. `None` as `server_us` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_threads_us: Option<f64>,
    /// kura-load itself (every client thread).
    pub client_us: f64,
    /// The whole machine over the phase; `None` where `/proc/stat` cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineUse>,
}

/// What the whole machine did during a phase.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MachineUse {
    /// The machine's cores (the `cpuN` lines of `/proc/stat`).
    pub cores: u32,
    /// Mean number of cores busy (user, system, interrupts), every process and kernel thread.
    pub busy_cores: f64,
    /// Mean number of cores the hypervisor ran something else on (steal), not counted as busy.
    pub steal_cores: f64,
    /// Busy CPU time per operation of everything but kura-load and the servers it knows,
    /// microseconds (never below 0: the readings are in ticks); `None` without the servers.
    pub others_us: Option<f64>,
}

/// The `cpu` line of `/proc/stat`, summed over the cores, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
struct MachineTicks {
    cores: u32,
    busy: u64,
    idle: u64,
    steal: u64,
}

/// The name actix gives the threads of its runtimes (`actix-rt|system:0|arbiter:N`, cut by the
/// kernel to 15 bytes): a server's request threads.
pub const REQUEST_THREADS: &str = "actix-rt|system";

/// One server's CPU time, read at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ServerReading {
    pid: u32,
    /// Seconds of CPU of every thread, the ended ones included; `None` if it could not be read.
    total: Option<f64>,
    /// Seconds of CPU of its live request threads ([`REQUEST_THREADS`]).
    request_threads: Option<f64>,
}

impl ServerReading {
    fn take(pid: u32) -> ServerReading {
        ServerReading {
            pid,
            total: process_cpu_secs(pid),
            request_threads: threads_cpu_secs(pid, REQUEST_THREADS),
        }
    }

    /// Seconds of CPU of every thread and of the request threads from `self` to the later
    /// reading `after`; `None` for the process if it went away, or its PID now names another
    /// process (a later reading below the earlier one). The request threads live as long as
    /// their server: the difference of their sums is theirs.
    fn since(&self, after: &ServerReading) -> Option<(f64, Option<f64>)> {
        let total = after.total? - self.total?;
        if self.pid != after.pid || total < 0.0 {
            return None;
        }
        let requests = after.request_threads.zip(self.request_threads);
        Some((
            total,
            requests.map(|(t1, t0)| t1 - t0).filter(|d| *d >= 0.0),
        ))
    }
}

/// CPU time of a set of processes and of this one, read at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSample {
    servers: Vec<ServerReading>,
    client: Option<f64>,
    machine: Option<MachineTicks>,
}

impl CpuSample {
    /// Read the CPU time of `server_pids` and of this process now.
    pub fn take(server_pids: &[u32]) -> CpuSample {
        CpuSample {
            servers: server_pids
                .iter()
                .map(|&pid| ServerReading::take(pid))
                .collect(),
            client: process_cpu_secs(std::process::id()),
            machine: std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|t| parse_proc_stat(&t)),
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
        // Figures only where every server has one.
        let spent: Option<Vec<(f64, Option<f64>)>> = (!self.servers.is_empty())
            .then(|| {
                self.servers
                    .iter()
                    .zip(&after.servers)
                    .map(|(r0, r1)| r0.since(r1))
                    .collect()
            })
            .flatten();
        let server = spent
            .as_ref()
            .map(|s| per_op(s.iter().map(|(total, _)| total).sum()));
        let request_threads = spent
            .as_ref()
            .and_then(|s| s.iter().map(|(_, req)| *req).sum::<Option<f64>>())
            .map(per_op);
        let machine = match (self.machine, after.machine, clock_ticks_per_second()) {
            (Some(m0), Some(m1), Some(hz)) => machine_use(m0, m1, hz, ops, server, client),
            _ => None,
        };
        Some(CpuPerOp {
            server_us: server,
            request_threads_us: request_threads,
            client_us: client,
            machine,
        })
    }
}

/// The machine's use between two readings, given the known processes' CPU per operation.
fn machine_use(
    m0: MachineTicks,
    m1: MachineTicks,
    hz: u64,
    ops: u64,
    server_us: Option<f64>,
    client_us: f64,
) -> Option<MachineUse> {
    let busy = m1.busy.checked_sub(m0.busy)?;
    let steal = m1.steal.checked_sub(m0.steal)?;
    let all = busy + steal + m1.idle.checked_sub(m0.idle)?;
    if all == 0 || m0.cores != m1.cores {
        return None;
    }
    let cores = f64::from(m1.cores);
    let busy_us = busy as f64 * 1e6 / hz as f64;
    Some(MachineUse {
        cores: m1.cores,
        busy_cores: busy as f64 / all as f64 * cores,
        steal_cores: steal as f64 / all as f64 * cores,
        others_us: server_us.map(|s| (busy_us / ops as f64 - s - client_us).max(0.0)),
    })
}

/// The first line of `/proc/stat` (`cpu user nice system idle iowait irq softirq steal ...`,
/// summed over the cores) and the number of `cpuN` lines. Guest time is part of `user`.
fn parse_proc_stat(text: &str) -> Option<MachineTicks> {
    let mut lines = text.lines();
    let mut f = lines.next()?.split_ascii_whitespace();
    if f.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = f.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = v.try_into().ok()?;
    let cores = lines
        .take_while(|l| l.starts_with("cpu"))
        .filter(|l| l[3..].starts_with(|c: char| c.is_ascii_digit()))
        .count();
    Some(MachineTicks {
        cores: u32::try_from(cores).ok().filter(|&c| c > 0)?,
        busy: user + nice + system + irq + softirq,
        idle: idle + iowait,
        steal,
    })
}

/// Seconds of CPU (user + system, all threads) process `pid` has used, from `/proc/PID/stat`.
pub fn process_cpu_secs(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let ticks = parse_stat_ticks(&text)?;
    Some(ticks as f64 / clock_ticks_per_second()? as f64)
}

/// Seconds of CPU the live threads of process `pid` whose name starts with `prefix` have used,
/// from `/proc/PID/task/*/stat`; `None` if the process cannot be read.
pub fn threads_cpu_secs(pid: u32, prefix: &str) -> Option<f64> {
    let hz = clock_ticks_per_second()? as f64;
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut ticks = 0u64;
    for task in tasks.flatten() {
        // A thread that ended since the listing has no stat any more: it counts for nothing.
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        if stat_name(&stat).is_some_and(|n| n.starts_with(prefix)) {
            ticks += parse_stat_ticks(&stat).unwrap_or(0);
        }
    }
    Some(ticks as f64 / hz)
}

/// The command (thread) name of a `/proc/PID/stat` line: field 2, between the first `(` and
/// the last `)`.
fn stat_name(stat: &str) -> Option<&str> {
    stat.get(stat.find('(')? + 1..stat.rfind(')')?)
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
        assert_eq!(stat_name(line), Some("kura (x) y"));
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

    /// A thread named with the prefix is counted and spinning raises its figure; the CPU the
    /// process's other threads spend is not counted.
    #[test]
    fn the_threads_of_a_name_are_read_apart_from_the_others() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::{Duration, Instant};
        let me = std::process::id();
        if !cfg!(target_os = "linux") {
            assert_eq!(threads_cpu_secs(me, "kura-test-spin"), None);
            return;
        }
        assert_eq!(threads_cpu_secs(me, "kura-test-spin"), Some(0.0));
        let (stop, exit) = (
            std::sync::Arc::new(AtomicBool::new(false)),
            std::sync::mpsc::channel::<()>(),
        );
        let spin = {
            let stop = stop.clone();
            let exit = exit.1;
            std::thread::Builder::new()
                .name("kura-test-spin".into())
                .spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
                    }
                    // Alive but idle until told to end: its figure must stay put.
                    let _ = exit.recv();
                })
                .unwrap()
        };
        let give_up = Instant::now() + Duration::from_secs(20);
        while threads_cpu_secs(me, "kura-test-spin").unwrap() == 0.0 {
            assert!(Instant::now() < give_up, "the thread's CPU never advanced");
            std::thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        let named = threads_cpu_secs(me, "kura-test-spin").unwrap();
        // This thread spins now, for five clock ticks of the process's CPU at least.
        let process = process_cpu_secs(me).unwrap();
        let tick = 1.0 / clock_ticks_per_second().unwrap() as f64;
        let mut x = 0u64;
        while process_cpu_secs(me).unwrap() < process + 5.0 * tick {
            assert!(Instant::now() < give_up, "this thread's CPU never advanced");
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
        }
        assert_eq!(
            threads_cpu_secs(me, "kura-test-spin"),
            Some(named),
            "another thread's CPU is not counted under the name"
        );
        assert_eq!(threads_cpu_secs(me, "kura-test-nobody"), Some(0.0));
        let _ = exit.0.send(());
        spin.join().unwrap();
    }

    #[test]
    fn per_op_divides_each_side_and_refuses_a_changed_server() {
        let at = |server: Option<f64>, pid: u32, client: f64| CpuSample {
            servers: vec![ServerReading {
                pid,
                total: server,
                request_threads: server.map(|s| s / 2.0),
            }],
            client: Some(client),
            machine: None,
        };
        let r = at(Some(1.0), 7, 2.0)
            .per_op(&at(Some(1.5), 7, 2.25), 50_000)
            .unwrap();
        assert!((r.server_us.unwrap() - 10.0).abs() < 1e-9);
        assert!((r.request_threads_us.unwrap() - 5.0).abs() < 1e-9);
        assert!((r.client_us - 5.0).abs() < 1e-9);
        // A server that exited (no reading) or went backwards (another process) has no figure.
        let gone = at(Some(1.0), 7, 2.0)
            .per_op(&at(None, 7, 2.25), 10)
            .unwrap();
        assert_eq!(gone.server_us, None);
        assert_eq!(gone.request_threads_us, None);
        let reused = at(Some(9.0), 7, 2.0)
            .per_op(&at(Some(1.0), 7, 2.25), 10)
            .unwrap();
        assert_eq!(reused.server_us, None);
        assert_eq!(reused.request_threads_us, None);
        assert_eq!(
            at(Some(1.0), 7, 2.0).per_op(&at(Some(2.0), 7, 3.0), 0),
            None
        );
        // Without servers, the client's figure alone.
        let none = CpuSample {
            servers: vec![],
            client: Some(1.0),
            machine: None,
        };
        let r = none
            .per_op(
                &CpuSample {
                    servers: vec![],
                    client: Some(1.1),
                    machine: None,
                },
                1_000,
            )
            .unwrap();
        assert_eq!((r.server_us, r.request_threads_us), (None, None));
        assert!((r.client_us - 100.0).abs() < 1e-6);
    }

    #[test]
    fn proc_stat_sums_busy_idle_and_steal_and_counts_the_cores() {
        let text = "cpu  100 5 50 1000 20 3 2 7 40 0\n\
                    cpu0 50 2 25 500 10 1 1 3 20 0\n\
                    cpu1 50 3 25 500 10 2 1 4 20 0\n\
                    intr 12345 0 0\n\
                    ctxt 999\n";
        let m = parse_proc_stat(text).unwrap();
        assert_eq!(m.cores, 2);
        // Guest time (40) is already part of user (100): not added twice.
        assert_eq!(m.busy, 100 + 5 + 50 + 3 + 2);
        assert_eq!(m.idle, 1000 + 20);
        assert_eq!(m.steal, 7);
        assert_eq!(parse_proc_stat("intr 1 2 3\n"), None);
        assert_eq!(parse_proc_stat("cpu 1 2 3\n"), None);
        assert_eq!(parse_proc_stat("cpu 1 2 3 4 5 6 7 8\n"), None);
    }

    #[test]
    fn the_machine_share_leaves_the_known_processes_out_of_others() {
        let m = |busy, idle, steal| MachineTicks {
            cores: 2,
            busy,
            idle,
            steal,
        };
        // 2 cores for 1 s at 100 Hz: 200 ticks, 150 busy, 10 stolen. 10,000 operations: 150
        // ticks = 1.5 s = 150 µs per operation, of which the server 100 and kura-load 30.
        let u = machine_use(
            m(1000, 5000, 0),
            m(1150, 5040, 10),
            100,
            10_000,
            Some(100.0),
            30.0,
        )
        .unwrap();
        assert_eq!(u.cores, 2);
        assert!((u.busy_cores - 1.5).abs() < 1e-9);
        assert!((u.steal_cores - 0.1).abs() < 1e-9);
        assert!((u.others_us.unwrap() - 20.0).abs() < 1e-9);
        // Without the servers, no figure for the others; ticks never make it negative.
        let u = machine_use(m(0, 0, 0), m(100, 100, 0), 100, 10_000, None, 30.0).unwrap();
        assert_eq!(u.others_us, None);
        let u = machine_use(m(0, 0, 0), m(10, 190, 0), 100, 10_000, Some(50.0), 30.0).unwrap();
        assert_eq!(u.others_us, Some(0.0));
        // No time passed, or a counter went backwards: no reading.
        assert_eq!(
            machine_use(m(5, 5, 5), m(5, 5, 5), 100, 10, None, 1.0),
            None
        );
        assert_eq!(
            machine_use(m(9, 5, 5), m(5, 9, 5), 100, 10, None, 1.0),
            None
        );
    }
}
