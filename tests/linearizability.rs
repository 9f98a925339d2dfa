//! Linearizability of single-cell operations over HTTP, checked with the Wing–Gong–Lowe search
//! (the algorithm of porcupine and Knossos) against a register model.
//!
//! Eight clients issue get / put / delete / check-and-put on a few cells of a real server (the
//! `kura` binary, `sync` durability), recording when each call started and returned. Cells are
//! independent registers, so each key's history is checked on its own (P-compositionality). A
//! history is linearizable if every operation can be placed at one instant between its call and
//! its return so that the sequence is legal for a register. RELIABILITY.md asks for 8 clients x
//! 4,000 operations in CI.

mod server_harness;

use server_harness::{b64, create_table, Http, Server};
use std::collections::HashSet;
use std::sync::{Arc, Barrier};
use std::time::Instant;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Op {
    Get,
    Put(Vec<u8>),
    Delete,
    /// Check-and-put: expected value (empty = absent) and the new value.
    Cas(Vec<u8>, Vec<u8>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Value(Option<Vec<u8>>),
    Done,
    Applied(bool),
}

#[derive(Clone, Debug)]
struct Event {
    key: usize,
    op: Op,
    outcome: Outcome,
    call: u128,
    ret: u128,
}

/// The register model: applies `op` to `state` and says whether `outcome` is what a register
/// would have answered.
fn step(state: &Option<Vec<u8>>, op: &Op, outcome: &Outcome) -> Option<Option<Vec<u8>>> {
    match (op, outcome) {
        (Op::Get, Outcome::Value(v)) => (v == state).then(|| state.clone()),
        (Op::Put(v), Outcome::Done) => Some(Some(v.clone())),
        (Op::Delete, Outcome::Done) => Some(None),
        (Op::Cas(expected, new), Outcome::Applied(applied)) => {
            let matches = if expected.is_empty() {
                state.as_ref().is_none_or(|v| v.is_empty())
            } else {
                state.as_ref() == Some(expected)
            };
            if matches != *applied {
                None
            } else if matches {
                Some(Some(new.clone()))
            } else {
                Some(state.clone())
            }
        }
        _ => None,
    }
}

/// Wing–Gong–Lowe search with Lowe's memoization of (linearized set, state).
fn linearizable(history: &[Event]) -> bool {
    let n = history.len();
    if n == 0 {
        return true;
    }
    // Events: (time, is_return, op index). Calls sort before returns at equal times, so that
    // touching operations count as concurrent (the permissive reading).
    let mut events: Vec<(u128, bool, usize)> = Vec::with_capacity(2 * n);
    for (i, e) in history.iter().enumerate() {
        events.push((e.call, false, i));
        events.push((e.ret, true, i));
    }
    events.sort();
    // Doubly linked list over event slots 0..2n, with a head sentinel at 2n.
    let head = 2 * n;
    let mut next = vec![usize::MAX; 2 * n + 1];
    let mut prev = vec![usize::MAX; 2 * n + 1];
    let mut call_slot = vec![0; n];
    let mut ret_slot = vec![0; n];
    let mut last = head;
    for (slot, &(_, is_ret, i)) in events.iter().enumerate() {
        next[last] = slot;
        prev[slot] = last;
        last = slot;
        if is_ret {
            ret_slot[i] = slot;
        } else {
            call_slot[i] = slot;
        }
    }
    let unlink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, s: usize| {
        let (p, nx) = (prev[s], next[s]);
        next[p] = nx;
        if nx != usize::MAX {
            prev[nx] = p;
        }
    };
    let relink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, s: usize| {
        let (p, nx) = (prev[s], next[s]);
        next[p] = s;
        if nx != usize::MAX {
            prev[nx] = s;
        }
    };

    let mut state: Option<Vec<u8>> = None;
    let mut linearized = vec![0u64; n.div_ceil(64)];
    let mut cache: HashSet<(Vec<u64>, Option<Vec<u8>>)> = HashSet::new();
    let mut stack: Vec<(usize, Option<Vec<u8>>)> = Vec::new();
    let mut entry = next[head];
    while next[head] != usize::MAX {
        if entry == usize::MAX {
            // Ran off the end without finding a return: backtrack.
            let Some((i, old)) = stack.pop() else {
                return false;
            };
            linearized[i / 64] &= !(1 << (i % 64));
            state = old;
            relink(&mut next, &mut prev, ret_slot[i]);
            relink(&mut next, &mut prev, call_slot[i]);
            entry = next[call_slot[i]];
            continue;
        }
        let (_, is_ret, i) = events[entry];
        if !is_ret {
            let e = &history[i];
            if let Some(new_state) = step(&state, &e.op, &e.outcome) {
                let mut lin = linearized.clone();
                lin[i / 64] |= 1 << (i % 64);
                if cache.insert((lin.clone(), new_state.clone())) {
                    stack.push((i, std::mem::replace(&mut state, new_state)));
                    linearized = lin;
                    unlink(&mut next, &mut prev, call_slot[i]);
                    unlink(&mut next, &mut prev, ret_slot[i]);
                    entry = next[head];
                    continue;
                }
            }
            entry = next[entry];
        } else {
            // A return whose call is not yet linearized: undo the last choice.
            let Some((j, old)) = stack.pop() else {
                return false;
            };
            linearized[j / 64] &= !(1 << (j % 64));
            state = old;
            relink(&mut next, &mut prev, ret_slot[j]);
            relink(&mut next, &mut prev, call_slot[j]);
            entry = next[call_slot[j]];
        }
    }
    true
}

fn ev(key: usize, op: Op, outcome: Outcome, call: u128, ret: u128) -> Event {
    Event {
        key,
        op,
        outcome,
        call,
        ret,
    }
}

#[test]
fn checker_accepts_a_sequential_register_history() {
    let h = vec![
        ev(0, Op::Put(b"a".to_vec()), Outcome::Done, 0, 1),
        ev(0, Op::Get, Outcome::Value(Some(b"a".to_vec())), 2, 3),
        ev(
            0,
            Op::Cas(b"a".to_vec(), b"b".to_vec()),
            Outcome::Applied(true),
            4,
            5,
        ),
        ev(
            0,
            Op::Cas(b"a".to_vec(), b"c".to_vec()),
            Outcome::Applied(false),
            6,
            7,
        ),
        ev(0, Op::Delete, Outcome::Done, 8, 9),
        ev(0, Op::Get, Outcome::Value(None), 10, 11),
    ];
    assert!(linearizable(&h));
}

#[test]
fn checker_rejects_a_stale_read_after_a_completed_write() {
    let h = vec![
        ev(0, Op::Put(b"a".to_vec()), Outcome::Done, 0, 1),
        ev(0, Op::Put(b"b".to_vec()), Outcome::Done, 2, 3),
        ev(0, Op::Get, Outcome::Value(Some(b"a".to_vec())), 4, 5),
    ];
    assert!(!linearizable(&h));
}

#[test]
fn checker_rejects_two_successful_cas_from_the_same_expected_value() {
    let h = vec![
        ev(0, Op::Put(b"a".to_vec()), Outcome::Done, 0, 1),
        ev(
            0,
            Op::Cas(b"a".to_vec(), b"x".to_vec()),
            Outcome::Applied(true),
            2,
            10,
        ),
        ev(
            0,
            Op::Cas(b"a".to_vec(), b"y".to_vec()),
            Outcome::Applied(true),
            3,
            9,
        ),
    ];
    assert!(!linearizable(&h));
}

#[test]
fn checker_accepts_reads_of_either_value_during_a_concurrent_write() {
    let h = vec![
        ev(0, Op::Put(b"a".to_vec()), Outcome::Done, 0, 1),
        ev(0, Op::Put(b"b".to_vec()), Outcome::Done, 2, 10),
        ev(0, Op::Get, Outcome::Value(Some(b"b".to_vec())), 3, 4),
        ev(0, Op::Get, Outcome::Value(Some(b"b".to_vec())), 5, 6),
    ];
    assert!(linearizable(&h));
    let mut h2 = h.clone();
    // Once a read has seen "b", a later read may not go back to "a".
    h2[3].outcome = Outcome::Value(Some(b"a".to_vec()));
    assert!(!linearizable(&h2));
}

/// One client's operations, issued over a keep-alive connection.
fn run_client(http: &mut Http, client: usize, ops: usize, keys: usize, t0: Instant) -> Vec<Event> {
    let mut rng = (client as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut rand = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut events = Vec::with_capacity(ops);
    for i in 0..ops {
        let key = (rand() % keys as u64) as usize;
        let path = format!("/lin/k{key}/cf:v");
        let value = format!("c{client}-{i}").into_bytes();
        let roll = rand() % 100;
        let op = if roll < 40 {
            Op::Get
        } else if roll < 65 {
            Op::Put(value)
        } else if roll < 75 {
            Op::Delete
        } else {
            let expected = if seen.is_empty() || rand() % 4 == 0 {
                Vec::new()
            } else {
                seen[(rand() % seen.len() as u64) as usize].clone()
            };
            Op::Cas(expected, value)
        };
        let call = t0.elapsed().as_nanos();
        let outcome = match &op {
            Op::Get => {
                let r = http
                    .request("GET", &path, &[("Accept", "application/octet-stream")], b"")
                    .expect("get");
                match r.status {
                    200 => Outcome::Value(Some(r.body)),
                    404 => Outcome::Value(None),
                    s => panic!("get {path}: unexpected {s}: {}", r.text()),
                }
            }
            Op::Put(v) => {
                let r = http
                    .request(
                        "PUT",
                        &path,
                        &[("Content-Type", "application/octet-stream")],
                        v,
                    )
                    .expect("put");
                assert_eq!(r.status, 200, "put {path}: {}", r.text());
                Outcome::Done
            }
            Op::Delete => {
                let r = http.request("DELETE", &path, &[], b"").expect("delete");
                assert_eq!(r.status, 200, "delete {path}: {}", r.text());
                Outcome::Done
            }
            Op::Cas(expected, new) => {
                let row = b64(format!("k{key}").as_bytes());
                let col = b64(b"cf:v");
                let body = format!(
                    "{{\"Row\":[{{\"key\":\"{row}\",\"Cell\":[{{\"column\":\"{col}\",\"$\":\"{}\"}},\
                     {{\"column\":\"{col}\",\"$\":\"{}\"}}]}}]}}",
                    b64(new),
                    b64(expected)
                );
                let r = http
                    .request(
                        "PUT",
                        &format!("/lin/k{key}?check=put"),
                        &[("Content-Type", "application/json")],
                        body.as_bytes(),
                    )
                    .expect("check-and-put");
                match r.status {
                    200 => Outcome::Applied(true),
                    304 => Outcome::Applied(false),
                    s => panic!("check-and-put k{key}: unexpected {s}: {}", r.text()),
                }
            }
        };
        let ret = t0.elapsed().as_nanos();
        if let Outcome::Value(Some(v)) = &outcome {
            seen.push(v.clone());
        }
        if let Op::Put(v) | Op::Cas(_, v) = &op {
            seen.push(v.clone());
        }
        if seen.len() > 32 {
            seen.remove(0);
        }
        events.push(Event {
            key,
            op,
            outcome,
            call,
            ret,
        });
    }
    events
}

#[test]
fn concurrent_get_put_delete_and_check_and_put_histories_are_linearizable() {
    const CLIENTS: usize = 8;
    const OPS_PER_CLIENT: usize = 500;
    const KEYS: usize = 4;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path(), &["--durability", "sync"]);
    create_table(&mut server.client(), "lin", &["cf"]);

    let barrier = Arc::new(Barrier::new(CLIENTS));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let mut http = server.client();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                run_client(&mut http, c, OPS_PER_CLIENT, KEYS, t0)
            })
        })
        .collect();
    let history: Vec<Event> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("client thread"))
        .collect();
    assert_eq!(history.len(), CLIENTS * OPS_PER_CLIENT);

    for key in 0..KEYS {
        let per_key: Vec<Event> = history.iter().filter(|e| e.key == key).cloned().collect();
        let applied = per_key
            .iter()
            .filter(|e| matches!(e.outcome, Outcome::Applied(true)))
            .count();
        assert!(
            linearizable(&per_key),
            "history of key k{key} ({} operations, {applied} successful CAS) is not linearizable",
            per_key.len()
        );
    }
}
