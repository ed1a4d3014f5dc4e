//! udat's Rust quick start on the software mlx5 HCA: two Endpoints of one
//! IA connected through a PSP, a send into a posted receive, an RDMA
//! write, their completions dequeued, and a clean close.
//!
//! `cargo run -p udat-softhca --example quickstart`
use std::error::Error;

use udat::*;
use udat_mlx5::Mlx5;
use udat_softhca::SoftHca;

const WAIT_US: u32 = 5_000_000;

/// The next event on `evd`, which must be `want`.
fn next(ia: &mut Ia<Mlx5<SoftHca>>, evd: EvdHandle, want: EventNumber) -> Result<Event, Box<dyn Error>> {
    let (event, _) = ia.evd_wait(evd, WAIT_US, 1)?;
    if event.number != want {
        return Err(format!("expected {want:?}, got {event:?}").into());
    }
    Ok(event)
}

/// Poll `evd` for a DTO completion that succeeded: its cookie and length.
fn completion(ia: &mut Ia<Mlx5<SoftHca>>, evd: EvdHandle) -> Result<(u64, u32), Box<dyn Error>> {
    loop {
        match ia.evd_dequeue(evd).map(|e| e.data) {
            Err(e) if e.error_type() == ErrorType::QueueEmpty => std::hint::spin_loop(),
            Ok(EventData::Dto { cookie, status: DtoStatus::Success, transferred_length: n, .. }) => {
                break Ok((cookie, n))
            }
            other => break Err(format!("unexpected {other:?}").into()),
        }
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut ia: Ia<Mlx5<SoftHca>> = Ia::open(Mlx5::new(SoftHca::new()), b"mlx5_soft0", 8)?;
    let h = ia.handle();
    let pz = ia.pz_create(h)?;
    // One registered buffer: the client's 4 KiB, then the server's.
    let mut buf = vec![0u8; 8192];
    let base = buf.as_ptr() as u64;
    let lmr = ia.lmr_create(h, MemType::Virtual { address: base, length: 8192 }, pz, MemPriv::ALL)?;
    let seg =
        |at: u64, len| LmrTriplet { lmr_context: lmr.lmr_context, virtual_address: base + at, segment_length: len };

    let cr_evd = ia.evd_create(h, 4, CnoHandle::NULL, EvdFlags::CR)?;
    let conn_evd = ia.evd_create(h, 8, CnoHandle::NULL, EvdFlags::CONNECTION)?;
    let client_dto = ia.evd_create(h, 16, CnoHandle::NULL, EvdFlags::DTO)?;
    let server_dto = ia.evd_create(h, 16, CnoHandle::NULL, EvdFlags::DTO)?;
    let client = ia.ep_create(h, pz, client_dto, client_dto, conn_evd, None)?;
    let server = ia.ep_create(h, pz, server_dto, server_dto, conn_evd, None)?;

    // The server listens on the IA's own address; the client connects.
    let psp = ia.psp_create(h, 4000, cr_evd, PspFlags::Consumer)?;
    let address = ia.ia_query(h)?.1.ia_address;
    ia.ep_connect(client, &address, 4000, WAIT_US, &[], Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
    let EventData::CrArrival { cr, .. } = next(&mut ia, cr_evd, EventNumber::ConnectionRequest)?.data else {
        return Err("no connection request".into());
    };
    ia.cr_accept(cr, server, &[])?;
    next(&mut ia, conn_evd, EventNumber::ConnectionEstablished)?;
    next(&mut ia, conn_evd, EventNumber::ConnectionEstablished)?;

    // A send into a receive the server posted.
    ia.ep_post_recv(server, &[seg(4096, 4096)], 1, CompletionFlags::DEFAULT)?;
    buf[..11].copy_from_slice(b"hello, udat");
    ia.ep_post_send(client, &[seg(0, 11)], 2, CompletionFlags::DEFAULT)?;
    completion(&mut ia, client_dto)?;
    let (cookie, len) = completion(&mut ia, server_dto)?;
    let message = String::from_utf8_lossy(&buf[4096..4096 + len as usize]);
    println!("received {len} bytes: {message:?} (cookie {cookie})");

    // An RDMA write of the client's 4 KiB into the server's.
    buf[..4096].fill(b'w');
    let rmr_context = lmr.rmr_context.ok_or("no rmr_context")?;
    let remote = RmrTriplet { rmr_context, virtual_address: base + 4096, segment_length: 4096 };
    ia.ep_post_rdma_write(client, &[seg(0, 4096)], 3, &remote, CompletionFlags::DEFAULT)?;
    let (cookie, len) = completion(&mut ia, client_dto)?;
    assert!(buf[4096..].iter().all(|&b| b == b'w'), "the write landed");
    println!("RDMA write of {len} bytes: done (cookie {cookie})");

    ia.ep_disconnect(client, CloseFlags::Graceful)?;
    next(&mut ia, conn_evd, EventNumber::ConnectionDisconnected)?;
    next(&mut ia, conn_evd, EventNumber::ConnectionDisconnected)?;
    ia.ep_free(client)?;
    ia.ep_free(server)?;
    ia.psp_free(psp)?;
    for evd in [client_dto, server_dto, conn_evd, cr_evd] {
        ia.evd_free(evd)?;
    }
    ia.lmr_free(lmr.lmr)?;
    ia.pz_free(pz)?;
    ia.close(CloseFlags::Graceful).map_err(|(_, e)| e)?;
    println!("quickstart on the software HCA: ok");
    Ok(())
}
