//! `cargo xtask fabric [--timeout SECS] -- COMMAND...`: two soft-RoCE
//! hosts joined by a cable, with faults on request.
//!
//! Two guests boot as `softroce` boots one (two kernels, an rxe device on
//! each), their virtio NICs the two ends of one Ethernet cable: QEMU sends
//! each end's frames to the other end's UDP port on this machine's
//! loopback, so no traffic leaves the machine. `COMMAND` runs on both, the
//! server at 10.0.0.1 and the client at 10.0.0.2, told apart by
//! `UDAT_FABRIC_ROLE` (`server`, `client`); `UDAT_RDMA_DEVICE`,
//! `UDAT_RDMA_ADDR` and `UDAT_PEER_ADDR` say the rest.
//!
//! A command asks for a fault by renaming a file holding one word into
//! `$UDAT_FABRIC_CTL/request`; the file disappears once the fault is done:
//! - `kill-peer`: the other guest stops as in a power cut (its QEMU is
//!   killed);
//! - `cut`: the cable is pulled, both ends' links going down (QEMU's
//!   `set_link`);
//! - `restore`: the cable is plugged back in;
//! - `sync NAME`: wait until the other guest asks for `sync NAME` too (a
//!   barrier, so that a client starts once its server listens).
//!
//! Both consoles stream here, each line under `[server]` or `[client]`.
//! The run passes when each command exits 0, or its guest was killed on
//! request.

use std::fs;
use std::net::UdpSocket;
use std::time::Duration;

use crate::softroce::{Console, Guest, Link, Net, Running};

const ROLES: [&str; 2] = ["server", "client"];

pub fn fabric(args: &[String]) -> Result<(), String> {
    let (timeout, command) = crate::softroce::parse(args)?;
    let guest = Guest::build()?;
    let ports = [free_udp_port()?, free_udp_port()?];
    eprintln!("fabric: booting two guests joined by a cable on UDP ports {} and {}", ports[0], ports[1]);
    let mut guests: [Option<Running>; 2] = [None, None];
    for (i, role) in ROLES.into_iter().enumerate() {
        let link = Link { role, host: i as u8 + 1, peer: 2 - i as u8, port: ports[i], peer_port: ports[1 - i] };
        guests[i] = Some(guest.spawn(&Net::Link(link), &command, Console::Prefixed(role))?);
    }
    let (mut statuses, mut killed) = ([None, None], [false, false]);
    let mut barriers: [Option<String>; 2] = [None, None];
    let started = std::time::Instant::now();
    while guests.iter().any(Option::is_some) {
        for i in 0..2 {
            if let Some(g) = guests[i].as_mut() {
                if g.stopped()? {
                    statuses[i] = guests[i].take().and_then(Running::finish);
                    // A command that failed ends the run: its peer may be
                    // waiting for it forever.
                    if statuses[i] != Some(0) {
                        if let Some(peer) = guests[1 - i].take() {
                            eprintln!("fabric: the {} failed; stopping the {}", ROLES[i], ROLES[1 - i]);
                            statuses[1 - i] = peer.finish();
                        }
                    }
                    continue;
                }
                if let Some(word) = request(g) {
                    if word.starts_with("sync ") {
                        barriers[i] = Some(word);
                        continue;
                    }
                    eprintln!("fabric: the {} asks: {word}", ROLES[i]);
                    match word.as_str() {
                        "kill-peer" => {
                            if let Some(mut peer) = guests[1 - i].take() {
                                peer.kill();
                                killed[1 - i] = true;
                                let _ = peer.finish();
                            }
                        }
                        "cut" | "restore" => {
                            let state = if word == "cut" { "off" } else { "on" };
                            for g in guests.iter().flatten() {
                                g.monitor(&format!("set_link cable {state}"))?;
                            }
                        }
                        other => {
                            return Err(format!("fabric: the {} asked for `{other}`, which is no fault", ROLES[i]))
                        }
                    }
                    if let Some(g) = guests[i].as_ref() {
                        let _ = fs::remove_file(g.run.join("request"));
                    }
                    eprintln!("fabric: {word}: done");
                }
            }
        }
        if barriers[0].is_some() && barriers[0] == barriers[1] {
            for g in guests.iter().flatten() {
                let _ = fs::remove_file(g.run.join("request"));
            }
            barriers = [None, None];
        }
        if started.elapsed() > timeout {
            return Err(format!("fabric: the guests did not finish within {} s and were killed", timeout.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("fabric: the guests ran {:.1} s", started.elapsed().as_secs_f64());
    let mut failures = Vec::new();
    for i in 0..2 {
        match (killed[i], statuses[i]) {
            (true, _) => eprintln!("fabric: the {} was killed on request", ROLES[i]),
            (false, Some(0)) => {}
            (false, Some(status)) => failures.push(format!("the {}'s command exited with {status}", ROLES[i])),
            (false, None) => failures.push(format!("the {} stopped without reporting its status", ROLES[i])),
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("fabric: {}", failures.join("; ")))
    }
}

/// The fault a guest asks for, if any.
fn request(guest: &Running) -> Option<String> {
    let word = fs::read_to_string(guest.run.join("request")).ok()?;
    Some(word.trim().to_string())
}

/// A UDP port on the loopback that nothing holds now.
fn free_udp_port() -> Result<u16, String> {
    let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("a UDP port: {e}"))?;
    Ok(socket.local_addr().map_err(|e| e.to_string())?.port())
}
