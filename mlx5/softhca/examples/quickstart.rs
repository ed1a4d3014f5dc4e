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

type Hca<'id> = Ia<'id, Mlx5<SoftHca>>;

/// The next event on `evd`, which must be `want`.
fn next<'id>(ia: &mut Hca<'id>, evd: &Evd<'id>, want: EventNumber) -> DatResult<Event> {
    let (event, _) = ia.evd_wait(evd, WAIT_US, 1)?;
    if event.number != want {
        eprintln!("expected {want:?}, got {event:?}");
        return Err(DatError::of(ErrorType::InvalidState));
    }
    Ok(event)
}

/// Poll `evd` for a DTO completion that succeeded: its cookie, length,
/// and the segment it gives back.
fn completion<'id>(ia: &mut Hca<'id>, evd: &Evd<'id>) -> DatResult<(u64, u32, Option<Seg<'id>>)> {
    loop {
        match ia.evd_dequeue(evd) {
            Err(e) if e.error_type() == ErrorType::QueueEmpty => std::hint::spin_loop(),
            Ok(Event {
                data: EventData::Dto { cookie, status: DtoStatus::Success, transferred_length, .. }, ..
            }) => break Ok((cookie, transferred_length, ia.take_seg())),
            other => {
                eprintln!("unexpected {other:?}");
                break Err(DatError::of(ErrorType::InternalError));
            }
        }
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    Ia::open(Mlx5::new(SoftHca::new()), b"mlx5_soft0", 8, |mut ia| {
        let pz = ia.pz_create()?;
        // The client's 4 KiB and the server's receive buffer are kept: the
        // program reads and writes them through their segments. The
        // server's RDMA target is given up to the IA, for the peer to write.
        let (client_lmr, mut client_buf) = ia.lmr_create_seg(vec![0u8; 4096], &pz)?;
        let (server_lmr, server_buf) = ia.lmr_create_seg(vec![0u8; 4096], &pz)?;
        let target = ia.lmr_create(vec![0u8; 4096], &pz, MemPriv::ALL)?;

        let cr_evd = ia.evd_create(4, None, EvdFlags::CR)?;
        let conn_evd = ia.evd_create(8, None, EvdFlags::CONNECTION)?;
        let client_dto = ia.evd_create(16, None, EvdFlags::DTO)?;
        let server_dto = ia.evd_create(16, None, EvdFlags::DTO)?;
        let client = ia.ep_create(&pz, &client_dto, &client_dto, Some(&conn_evd), None)?;
        let server = ia.ep_create(&pz, &server_dto, &server_dto, Some(&conn_evd), None)?;

        // The server listens on the IA's own address; the client connects.
        let psp = ia.psp_create(4000, &cr_evd, PspFlags::Consumer)?;
        let address = ia.ia_query()?.ia_address;
        ia.ep_connect(&client, &address, 4000, WAIT_US, &[], Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
        let request = next(&mut ia, &cr_evd, EventNumber::ConnectionRequest)?;
        let cr = ia.cr_of(&request).ok_or(DatError::of(ErrorType::InvalidState))?;
        ia.cr_accept(cr, &server, &[])?;
        next(&mut ia, &conn_evd, EventNumber::ConnectionEstablished)?;
        next(&mut ia, &conn_evd, EventNumber::ConnectionEstablished)?;

        // A send into a receive the server posted: the receive takes the
        // server's segment, and its completion gives it back.
        ia.ep_post_recv_seg(&server, server_buf, 1, CompletionFlags::DEFAULT)?;
        client_buf[..11].copy_from_slice(b"hello, udat");
        let message = client_buf.local_part(0, 11).ok_or(DatError::invalid_arg(2))?;
        ia.ep_post_send(&client, &[message], 2, CompletionFlags::DEFAULT)?;
        completion(&mut ia, &client_dto)?;
        let (cookie, len, server_buf) = completion(&mut ia, &server_dto)?;
        let server_buf = server_buf.ok_or(DatError::of(ErrorType::InternalError))?;
        let text = String::from_utf8_lossy(&server_buf[..len as usize]);
        println!("received {len} bytes: {text:?} (cookie {cookie})");

        // An RDMA write of 4 KiB into the server's given-up buffer.
        client_buf.fill(b'w');
        let remote = target.remote(0, 4096).ok_or(DatError::of(ErrorType::InternalError))?;
        ia.ep_post_rdma_write(&client, &[client_buf.local()], 3, &remote, CompletionFlags::DEFAULT)?;
        let (cookie, len, _) = completion(&mut ia, &client_dto)?;
        // Freeing the LMR ends the peer's access and gives the memory back.
        let written = ia.lmr_free(target)?.ok_or(DatError::of(ErrorType::InternalError))?;
        assert!(written.iter().all(|&b| b == b'w'), "the write landed");
        println!("RDMA write of {len} bytes: done (cookie {cookie})");

        ia.ep_disconnect(&client, CloseFlags::Graceful)?;
        next(&mut ia, &conn_evd, EventNumber::ConnectionDisconnected)?;
        next(&mut ia, &conn_evd, EventNumber::ConnectionDisconnected)?;
        ia.ep_free(client)?;
        ia.ep_free(server)?;
        ia.psp_free(psp)?;
        for evd in [client_dto, server_dto, conn_evd, cr_evd] {
            ia.evd_free(evd)?;
        }
        // The segments are still out: the registrations go, and the memory
        // stays with them until `open` returns.
        ia.lmr_free(client_lmr)?;
        ia.lmr_free(server_lmr)?;
        ia.pz_free(pz)?;
        ia.close(CloseFlags::Graceful)?;
        Ok(())
    })?;
    println!("quickstart on the software HCA: ok");
    Ok(())
}
