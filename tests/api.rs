//! The safe Rust API, `udat::Ia`, on the mock backend: objects, refusals
//! that give back what they were given, and memory that comes back only
//! when the transport is done with it.
use udat::*;
use udat_testkit::mock::{MockBackend, MOCK_IA_NAME};

/// Run `test` on an IA of the mock.
fn mock<R>(test: impl for<'id> FnOnce(Ia<'id, MockBackend>) -> DatResult<R>) -> R {
    Ia::open(MockBackend::new(), MOCK_IA_NAME, 4, test).unwrap()
}

/// An EP of `ia` that connected and lost its connection: what it is
/// given completes at once, flushed, as dat_ep_disconnect(3DAT) says.
fn disconnected<'id>(ia: &mut Ia<'id, MockBackend>, pz: &Pz<'id>, dto: &Evd<'id>) -> DatResult<Ep<'id>> {
    let conn = ia.evd_create(4, None, EvdFlags::CONNECTION)?;
    let ep = ia.ep_create(pz, dto, dto, Some(&conn), None)?;
    ia.ep_connect(&ep, &IaAddress::default(), 1, TIMEOUT_INFINITE, b"", Qos::BEST_EFFORT, ConnectFlags::DEFAULT)?;
    ia.ep_disconnect(&ep, CloseFlags::Abrupt)?;
    Ok(ep)
}

#[test]
fn ia_open_unknown_name_is_provider_not_found() {
    let e = Ia::open(MockBackend::new(), b"mlx5_9", 4, |_| Ok(())).unwrap_err();
    assert_eq!(e.error_type(), ErrorType::ProviderNotFound);
    assert_eq!(e.to_raw(), 0x800a_0000);
}

#[test]
fn graceful_close_refused_returns_the_ia_intact() {
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        // dat_ia_close(3DAT): a graceful close of an IA with objects left
        // is refused, and leaves them.
        let refused = ia.close(CloseFlags::Graceful).unwrap_err();
        assert_eq!(refused.error.error_type(), ErrorType::InvalidState);
        let mut ia = refused.object;
        ia.pz_free(pz)?;
        ia.close(CloseFlags::Graceful)?;
        Ok(())
    })
}

#[test]
fn a_refused_free_gives_the_object_back_and_errors_reach_std_error() {
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        let lmr = ia.lmr_create(vec![0u8; 64], &pz, MemPriv::ALL)?;
        // dat_pz_free(3DAT): a PZ an LMR uses is not freed.
        let refused = ia.pz_free(pz).unwrap_err();
        assert_eq!(refused.error.subtype(), Subtype::InvalidStatePzInUse);
        let pz = refused.object;
        let as_std: Result<(), Box<dyn std::error::Error>> = ia.pz_free(pz).map_err(Into::into);
        assert_eq!(as_std.unwrap_err().to_string(), "DAT_INVALID_STATE(DAT_INVALID_STATE_PZ_IN_USE)");
        ia.lmr_free(lmr)?;
        Ok(())
    })
}

#[test]
fn given_up_memory_comes_back_from_lmr_free_as_it_was() {
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        let lmr = ia.lmr_create((0..=255u8).collect::<Vec<u8>>(), &pz, MemPriv::ALL)?;
        assert_eq!(lmr.registered_size(), 256);
        assert_eq!(ia.lmr_query(&lmr)?.mem_privileges, MemPriv::ALL);
        let remote = lmr.remote(16, 8).expect("remote privileges give an rmr_context");
        assert_eq!(remote.virtual_address, lmr.registered_address() + 16);
        let memory = ia.lmr_free(lmr)?.expect("nothing else holds it");
        assert!(memory.iter().enumerate().all(|(i, &b)| b == i as u8));
        Ok(())
    })
}

#[test]
fn a_segment_outside_its_lmr_is_invalid_parameter() {
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        let lmr = ia.lmr_create(vec![0u8; 64], &pz, MemPriv::ALL)?;
        assert!(lmr.local(0, 64).is_ok() && lmr.target(63, 1).is_ok());
        // dat_ep_post_send(3DAT): a segment outside its LMR is
        // DAT_INVALID_PARAMETER; no token names one.
        assert_eq!(lmr.local(1, 64).unwrap_err().error_type(), ErrorType::InvalidParameter);
        assert_eq!(lmr.target(u64::MAX, 2).unwrap_err().error_type(), ErrorType::InvalidParameter);
        assert!(lmr.remote(64, 1).is_none());
        Ok(())
    })
}

#[test]
fn memory_udat_does_not_own_registers_only_through_unsafe() {
    let memory: &'static mut [u8] = Box::leak(vec![0u8; 256].into_boxed_slice());
    let address = std::ptr::NonNull::new(memory.as_mut_ptr()).unwrap();
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        // SAFETY: the memory is leaked, so it stays allocated, and nothing
        // makes a reference to it after this point.
        let lmr = unsafe { ia.lmr_create_raw(address, 256, &pz, MemPriv::ALL)? };
        assert_eq!(lmr.registered_address(), address.as_ptr() as u64);
        assert!(lmr.target(0, 256).is_ok());
        assert!(ia.lmr_free(lmr)?.is_none(), "no memory of udat's to give back");
        Ok(())
    })
}

#[test]
fn a_refused_registration_gives_the_memory_back() {
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        // dat_lmr_create(3DAT): no bytes is an invalid length.
        let refused = ia.lmr_create(Vec::new(), &pz, MemPriv::ALL).unwrap_err();
        assert_eq!(refused.error.error_type(), ErrorType::InvalidParameter);
        let refused = ia.lmr_create(vec![1, 2, 3], &pz, MemPriv(0x4)).unwrap_err();
        assert_eq!(&refused.object[..], &[1, 2, 3]);
        Ok(())
    })
}

#[test]
fn kept_memory_is_local_and_written_only_through_its_segments() {
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        let (lmr, seg) = ia.lmr_create_seg(vec![0u8; 128], &pz)?;
        assert_eq!(lmr.rmr_context(), None, "no remote privileges");
        assert_eq!(ia.lmr_query(&lmr)?.mem_privileges, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
        assert_eq!(lmr.target(0, 64).unwrap_err().error_type(), ErrorType::PrivilegesViolation);
        let (mut head, tail) = seg.split_at(100).unwrap();
        head.fill(1);
        assert_eq!((head.len(), tail.len()), (100, 28));
        let tail = tail.split_at(29).unwrap_err();
        assert!(tail.iter().all(|&b| b == 0), "no other segment reaches it");
        assert!(head.local_part(90, 11).is_none() && head.local_part(90, 10).is_some());
        // The registration goes; the segments keep their memory until the
        // IA's `open` returns.
        assert!(ia.lmr_free(lmr)?.is_none());
        assert_eq!(head.iter().filter(|&&b| b == 1).count(), 100);
        Ok(())
    })
}

#[test]
fn a_receive_into_a_seg_gives_it_back_with_its_completion_and_cookie() {
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        let dto = ia.evd_create(8, None, EvdFlags::DTO)?;
        let ep = disconnected(&mut ia, &pz, &dto)?;
        let (_lmr, seg) = ia.lmr_create_seg(vec![5u8; 64], &pz)?;
        let (first, second) = seg.split_at(32).unwrap();
        ia.ep_post_recv_seg(&ep, first, u64::MAX, CompletionFlags::DEFAULT)?;
        ia.ep_post_recv_seg(&ep, second, 0, CompletionFlags::DEFAULT)?;
        assert!(ia.take_seg().is_none(), "not before the completion");
        let a = ia.evd_dequeue(&dto)?;
        assert!(matches!(a.data, EventData::Dto { cookie: u64::MAX, status: DtoStatus::Flushed, .. }));
        let a = ia.take_seg().unwrap();
        let b = ia.evd_dequeue(&dto)?;
        assert!(matches!(b.data, EventData::Dto { cookie: 0, status: DtoStatus::Flushed, .. }));
        let b = ia.take_seg().unwrap();
        assert!(ia.take_seg().is_none(), "each once");
        assert_eq!((a.len(), b.len()), (32, 32));
        assert!(a.iter().chain(b.iter()).all(|&b| b == 5));
        Ok(())
    })
}

#[test]
fn a_receive_into_given_up_memory_keeps_its_cookie() {
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        let dto = ia.evd_create(8, None, EvdFlags::DTO)?;
        let ep = disconnected(&mut ia, &pz, &dto)?;
        let lmr = ia.lmr_create(vec![0u8; 64], &pz, MemPriv::ALL)?;
        ia.ep_post_recv(&ep, &[lmr.target(0, 64)?], 77, CompletionFlags::DEFAULT)?;
        let done = ia.evd_dequeue(&dto)?;
        assert!(matches!(done.data, EventData::Dto { cookie: 77, op: DtoOp::Receive, .. }));
        assert!(ia.take_seg().is_none());
        Ok(())
    })
}

#[test]
fn a_read_that_would_not_complete_is_refused_and_its_segment_given_back() {
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        let dto = ia.evd_create(8, None, EvdFlags::DTO)?;
        let ep = disconnected(&mut ia, &pz, &dto)?;
        let (_lmr, seg) = ia.lmr_create_seg(vec![0u8; 64], &pz)?;
        let remote = RmrTriplet { rmr_context: 1, virtual_address: 0x1000, segment_length: 64 };
        let refused = ia.ep_post_rdma_read_seg(&ep, seg, 1, &remote, CompletionFlags::SUPPRESS).unwrap_err();
        assert_eq!(refused.error, DatError::invalid_arg(6));
        let lmr = ia.lmr_create(vec![0u8; 64], &pz, MemPriv::ALL)?;
        let target = lmr.target(0, 64)?;
        let e = ia.ep_post_rdma_read(&ep, &[target], 2, &remote, CompletionFlags::SUPPRESS).unwrap_err();
        assert_eq!(e, DatError::invalid_arg(6));
        // Signalled, the read is posted, flushed, and its segment returns.
        ia.ep_post_rdma_read_seg(&ep, refused.object, 3, &remote, CompletionFlags::DEFAULT)?;
        let done = ia.evd_dequeue(&dto)?;
        assert!(matches!(done.data, EventData::Dto { cookie: 3, op: DtoOp::RdmaRead, .. }));
        assert_eq!(ia.take_seg().map(|s| s.len()), Some(64));
        Ok(())
    })
}

#[test]
fn a_send_names_its_segment_and_keeps_the_post_rules() {
    mock(|mut ia| {
        let pz = ia.pz_create()?;
        let dto = ia.evd_create(8, None, EvdFlags::DTO)?;
        let ep = ia.ep_create(&pz, &dto, &dto, None, None)?;
        let (_lmr, seg) = ia.lmr_create_seg(vec![0u8; 64], &pz)?;
        // dat_ep_post_send(3DAT): an Unconnected EP is DAT_INVALID_STATE.
        let e = ia.ep_post_send(&ep, &[seg.local()], 1, CompletionFlags::DEFAULT).unwrap_err();
        assert_eq!(e.error_type(), ErrorType::InvalidState);
        let dto2 = ia.evd_create(8, None, EvdFlags::DTO)?;
        let ep2 = disconnected(&mut ia, &pz, &dto2)?;
        ia.ep_post_send(&ep2, &[seg.local()], 4, CompletionFlags::DEFAULT)?;
        assert!(matches!(ia.evd_dequeue(&dto2)?.data, EventData::Dto { cookie: 4, op: DtoOp::Send, .. }));
        Ok(())
    })
}

#[test]
fn an_aligned_buffer_starts_on_its_boundary() {
    let page = Buffer::aligned(8192, 4096).unwrap();
    assert_eq!(page.as_ptr() as usize % 4096, 0);
    assert!(page.iter().all(|&b| b == 0));
    assert!(Buffer::aligned(64, 3).is_none());
    assert!(Buffer::aligned(0, 64).is_none());
}

#[test]
fn an_evd_tied_to_a_cno_is_not_freed_before_it() {
    mock(|mut ia| {
        let cno = ia.cno_create()?;
        let evd = ia.evd_create(4, Some(&cno), EvdFlags::SOFTWARE)?;
        // dat_cno_free(3DAT): refused while an EVD is tied to it.
        let cno = ia.cno_free(cno).unwrap_err().object;
        ia.evd_modify_cno(&evd, None)?;
        ia.cno_free(cno)?;
        ia.evd_free(evd)?;
        Ok(())
    })
}

#[test]
fn the_mock_has_no_cno_descriptor() {
    mock(|mut ia| {
        assert_eq!(ia.cno_fd_create().unwrap_err().error_type(), ErrorType::NotImplemented);
        Ok(())
    })
}
