//! UD Endpoints of the IB extension through the provider table on the
//! software HCA, as `dtestx -u` uses them: dat_ep_create of
//! `DAT_IB_SERVICE_TYPE_UD`, connects and accepts that end in
//! `DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED` with the peer's
//! `DAT_IB_ADDR_HANDLE` in the extension data, `dat_ib_post_send_ud`,
//! `DAT_IB_DTO_RECV_UD` receives naming their sender, and
//! `dat_ib_ud_ah_free`. The core's tests hold the rest of the rules
//! (`core/tests/ud.rs`).

mod common;

use std::collections::BTreeSet;
use std::ffi::CStr;
use std::ptr;

use common::{ok, ty, Rig, SOFTHCA};
use udat_capi::sys::*;

/// Bytes of the GRH before each datagram in a UD receive buffer.
const GRH: usize = 40;
/// Peers of the scale test.
const PEERS: usize = 1000;

/// The IB extension's record in `event`.
fn ext(event: &DAT_EVENT) -> DAT_IB_EXTENSION_EVENT_DATA {
    // SAFETY: the extension area is 64 bytes of 8-byte alignment, and udat
    // writes a whole record into it for every extension event.
    unsafe { ptr::read(event.event_extension_data.as_ptr().cast()) }
}

/// One extended operation through the provider's entry for them, with
/// what `c/ext.c` reads from `dat_extension_op`'s arguments.
fn ext_op(rig: &Rig, ep: DAT_EP_HANDLE, post: &udat_ext_post) -> DAT_RETURN {
    // SAFETY: every udat provider's table heads a `udat_provider_head`,
    // whose `post` takes what `dat_extension_op` would pass (`c/ext.c`).
    let entry = unsafe { (*rig.table.cast::<udat_provider_head>()).post.unwrap() };
    // SAFETY: the pointers in `post` are null or valid.
    unsafe { entry(ep, post) }
}

/// The address handle in a UD record (every UD record holds that member).
fn remote_ah(x: &DAT_IB_EXTENSION_EVENT_DATA) -> DAT_IB_ADDR_HANDLE {
    // SAFETY: udat fills `remote_ah` in every UD connection and DTO record.
    unsafe { x.__bindgen_anon_1.remote_ah }
}

/// The cookie of a DTO completion, all 64 bits of it.
fn cookie(dto: &DAT_DTO_COMPLETION_EVENT_DATA) -> u64 {
    // SAFETY: a cookie is 64 bits, whichever member was set.
    unsafe { dto.user_cookie.as_64 }
}

fn blank(op: DAT_IB_OP) -> udat_ext_post {
    udat_ext_post {
        op,
        segments: 0,
        local: ptr::null(),
        cookie: DAT_DTO_COOKIE { as_64: 0 },
        remote: ptr::null(),
        compare_add: 0,
        swap: 0,
        immediate: 0,
        flags: DAT_COMPLETION_DEFAULT_FLAG,
        ah: ptr::null(),
        cm: DAT_CONTEXT { as_64: 0 },
    }
}

/// `dat_ib_post_send_ud(ep, 1, &local, ah, cookie, flags)`.
fn send_ud(
    rig: &Rig,
    ep: DAT_EP_HANDLE,
    local: &DAT_LMR_TRIPLET,
    ah: *const DAT_IB_ADDR_HANDLE,
    cookie: u64,
) -> DAT_RETURN {
    let post =
        udat_ext_post { segments: 1, local, ah, cookie: DAT_DTO_COOKIE { as_64: cookie }, ..blank(DAT_IB_UD_SEND_OP) };
    ext_op(rig, ep, &post)
}

/// `dat_ib_ud_ah_free(ep, ah)`.
fn ah_free(rig: &Rig, ep: DAT_EP_HANDLE, ah: *const DAT_IB_ADDR_HANDLE) -> DAT_RETURN {
    ext_op(rig, ep, &udat_ext_post { ah, ..blank(DAT_IB_UD_AH_FREE_OP) })
}

/// A UD EP of `rig` in `pz` whose queues hold `dtos` of each stream.
fn ud_ep(rig: &Rig, pz: DAT_PZ_HANDLE, evds: [DAT_EVD_HANDLE; 2], dtos: i32) -> DAT_EP_HANDLE {
    let attr = DAT_EP_ATTR {
        service_type: DAT_IB_SERVICE_TYPE_UD as DAT_SERVICE_TYPE,
        max_message_size: 4096,
        max_recv_dtos: dtos,
        max_request_dtos: dtos,
        max_recv_iov: 1,
        max_request_iov: 1,
        ..Default::default()
    };
    let [dto, conn] = evds;
    let mut ep = ptr::null_mut();
    // SAFETY: live handles of this provider and valid pointers.
    let ret = unsafe { rig.t().ep_create_func.unwrap()(rig.ia, pz, dto, dto, conn, &attr, &mut ep) };
    ok(ret, "dat_ep_create of DAT_IB_SERVICE_TYPE_UD");
    ep
}

/// `dat_ep_connect` of `ep` to this IA's listener on `qual`, carrying
/// `index` as its private data.
fn dial(rig: &Rig, ep: DAT_EP_HANDLE, qual: u64, index: u32) {
    let attr = rig.attr();
    let mut data = index.to_be_bytes();
    let (qos, flags) = (DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG);
    // SAFETY: a live EP, the IA's own address, 4 bytes of private data.
    let ret = unsafe {
        rig.t().ep_connect_func.unwrap()(
            ep,
            attr.ia_address_ptr,
            qual,
            u32::MAX,
            4,
            data.as_mut_ptr().cast(),
            qos,
            flags,
        )
    };
    ok(ret, "dat_ep_connect of a UD EP");
}

/// The 4 bytes of private data of a connection event, as a number.
fn index_of(event: &DAT_EVENT) -> u32 {
    // SAFETY: a connection event's data.
    let data = unsafe { event.event_data.connect_event_data };
    assert_eq!(data.private_data_size, 4);
    // SAFETY: the provider keeps the 4 bytes while the handle lives.
    u32::from_be_bytes(unsafe { ptr::read(data.private_data.cast::<[u8; 4]>()) })
}

/// The IA says it has UD, and a UD EP says so in its query.
#[test]
fn dat_ia_query_names_dat_ib_ud_and_dat_ep_query_the_service() {
    let rig = Rig::new(c"udat-ud-attr", SOFTHCA);
    let (mut ia_attr, mut attr) = (DAT_IA_ATTR::default(), DAT_PROVIDER_ATTR::default());
    // SAFETY: a live IA and valid out-pointers.
    let ret = unsafe { rig.t().ia_query_func.unwrap()(rig.ia, ptr::null_mut(), 0, &mut ia_attr, u64::MAX, &mut attr) };
    ok(ret, "dat_ia_query");
    // SAFETY: the provider's attributes, static strings.
    let named =
        unsafe { std::slice::from_raw_parts(attr.provider_specific_attr, attr.num_provider_specific_attr as usize) };
    // SAFETY: as above.
    let ud = named.iter().find(|a| unsafe { CStr::from_ptr(a.name) } == c"DAT_IB_UD").expect("DAT_IB_UD named");
    // SAFETY: as above.
    assert_eq!(unsafe { CStr::from_ptr(ud.value) }, c"TRUE");

    let pz = rig.pz();
    let evds = [rig.evd(8, DAT_EVD_DTO_FLAG), rig.evd(8, DAT_EVD_CONNECTION_FLAG)];
    let ep = ud_ep(&rig, pz, evds, 4);
    let mut param = DAT_EP_PARAM::default();
    // SAFETY: a live EP and a valid out-pointer.
    ok(unsafe { rig.t().ep_query_func.unwrap()(ep, 0, &mut param) }, "dat_ep_query");
    assert_eq!(param.ep_attr.service_type, DAT_IB_SERVICE_TYPE_UD as DAT_SERVICE_TYPE);
}

/// Bad input to the UD operations gets DAT errors: a null EP handle, a
/// null or unknown address handle, a UD send of an RC EP, a send of a UD
/// EP with no peer yet, a CM context that names no connection.
#[test]
fn ud_operations_refuse_bad_handles_and_null_pointers() {
    let rig = Rig::new(c"udat-ud-bad", SOFTHCA);
    let pz = rig.pz();
    let evds = [rig.evd(8, DAT_EVD_DTO_FLAG), rig.evd(8, DAT_EVD_CONNECTION_FLAG)];
    let (ud, rc) = (ud_ep(&rig, pz, evds, 4), rig.ep(pz, evds[0], evds[0], evds[1]));
    let mut buf = vec![0u8; 64];
    let (_, context, _) = rig.lmr(pz, &mut buf, DAT_MEM_PRIV_ALL_FLAG);
    let local = DAT_LMR_TRIPLET { lmr_context: context, virtual_address: buf.as_ptr() as u64, segment_length: 8 };
    let fake = DAT_IB_ADDR_HANDLE { ah: 0x1234_5678 as *mut ibv_ah, qpn: 1, ..Default::default() };

    assert_eq!(ty(send_ud(&rig, ptr::null_mut(), &local, &fake, 1)), DAT_INVALID_HANDLE);
    assert_eq!(send_ud(&rig, ud, &local, ptr::null(), 1), DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG5);
    assert_eq!(ty(send_ud(&rig, ud, &local, &fake, 1)), DAT_INVALID_STATE, "no peer resolved yet");
    assert_eq!(send_ud(&rig, rc, &local, &fake, 1), DAT_CLASS_ERROR | DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_EP);
    assert_eq!(ah_free(&rig, ud, ptr::null()), DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
    assert_eq!(ah_free(&rig, ud, &fake), DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
    let cm_free = udat_ext_post { cm: DAT_CONTEXT { as_64: 0xdead }, ..blank(DAT_IB_UD_CM_FREE_OP) };
    assert_eq!(ext_op(&rig, ud, &cm_free), DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
    let mut local = local;
    // SAFETY: a live EP, a triplet inside a live LMR.
    let rc_send = unsafe {
        rig.t().ep_post_send_func.unwrap()(ud, 1, &mut local, DAT_DTO_COOKIE { as_64: 2 }, DAT_COMPLETION_DEFAULT_FLAG)
    };
    assert_eq!(ty(rc_send), DAT_INVALID_STATE, "a UD EP with no peer takes no send");
}

/// One UD EP and 1,000 peers, each a UD EP that connects to it: the hub
/// accepts each request, both ends hear the other's address handle, and
/// a datagram goes each way through every handle. Every message is
/// delivered exactly once, lands after its GRH, and names its sender's
/// QP; the hub's handles are then freed.
#[test]
fn one_ud_ep_exchanges_datagrams_with_a_thousand_peers() {
    let rig = Rig::new(c"udat-ud-scale", SOFTHCA);
    let pz = rig.pz();
    let qlen = (4 * PEERS) as i32;
    let (cr_evd, hub_dto, hub_conn) =
        (rig.evd(qlen, DAT_EVD_CR_FLAG), rig.evd(qlen, DAT_EVD_DTO_FLAG), rig.evd(qlen, DAT_EVD_CONNECTION_FLAG));
    let (peer_dto, peer_conn) = (rig.evd(qlen, DAT_EVD_DTO_FLAG), rig.evd(qlen, DAT_EVD_CONNECTION_FLAG));
    let hub = ud_ep(&rig, pz, [hub_dto, hub_conn], PEERS as i32);
    let peers: Vec<_> = (0..PEERS).map(|_| ud_ep(&rig, pz, [peer_dto, peer_conn], 2)).collect();
    let psp = rig.psp(9100, cr_evd);

    // One buffer: the hub's receives, the peers' receives, and the
    // message each side sends (its index, 4 bytes).
    let slot = 64;
    let mut mem = vec![0u8; slot * (3 * PEERS + 1)];
    let (_, context, _) = rig.lmr(pz, &mut mem, DAT_MEM_PRIV_ALL_FLAG);
    let base = mem.as_ptr() as u64;
    let seg = |i: usize, len: u32| DAT_LMR_TRIPLET {
        lmr_context: context,
        virtual_address: base + (i * slot) as u64,
        segment_length: len,
    };
    let t = rig.t();
    for (i, &peer) in peers.iter().enumerate() {
        for (ep, at) in [(hub, i), (peer, PEERS + i)] {
            let mut recv = seg(at, slot as u32);
            // SAFETY: a live EP, a triplet inside a live LMR.
            let ret = unsafe { t.ep_post_recv_func.unwrap()(ep, 1, &mut recv, DAT_DTO_COOKIE { as_64: at as u64 }, 0) };
            ok(ret, "dat_ep_post_recv");
        }
        let index = (i as u32).to_be_bytes();
        mem[(2 * PEERS + i) * slot..][..4].copy_from_slice(&index);
        dial(&rig, peer, 9100, i as u32);
    }
    for _ in 0..PEERS {
        let request = rig.next(cr_evd);
        assert_eq!(request.event_number, DAT_IB_UD_CONNECTION_REQUEST_EVENT as DAT_EVENT_NUMBER);
        // SAFETY: a CR arrival's data.
        let cr = unsafe { request.event_data.cr_arrival_event_data.cr_handle };
        // SAFETY: a live CR and EP, no private data.
        ok(unsafe { t.cr_accept_func.unwrap()(cr, hub, 0, ptr::null_mut()) }, "dat_cr_accept on the UD hub");
    }
    // The hub's handle of each peer, by the peer's index; each peer's
    // handle of the hub.
    let mut to_peer = vec![None; PEERS];
    for _ in 0..PEERS {
        let e = rig.next(hub_conn);
        assert_eq!(e.event_number, DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED as DAT_EVENT_NUMBER);
        let x = ext(&e);
        assert_eq!((x.type_, x.status), (DAT_IB_UD_PASSIVE_REMOTE_AH, DAT_OP_SUCCESS));
        let i = index_of(&e) as usize;
        assert!(to_peer[i].replace(remote_ah(&x)).is_none(), "peer {i} resolved twice");
    }
    let mut to_hub = Vec::with_capacity(PEERS);
    for _ in 0..PEERS {
        let e = rig.next(peer_conn);
        assert_eq!(e.event_number, DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED as DAT_EVENT_NUMBER);
        let x = ext(&e);
        assert_eq!(x.type_, DAT_IB_UD_REMOTE_AH);
        // SAFETY: a connection event's data.
        let ep = unsafe { e.event_data.connect_event_data.ep_handle };
        to_hub.push((ep, remote_ah(&x)));
    }
    // SAFETY: a live PSP.
    ok(unsafe { t.psp_free_func.unwrap()(psp) }, "dat_psp_free");

    // The hub sends each peer its index; each peer sends the hub its own.
    let peer_qpns: Vec<u32> = to_peer.iter().map(|a| a.unwrap().qpn).collect();
    for (i, ah) in to_peer.iter().enumerate() {
        ok(send_ud(&rig, hub, &seg(2 * PEERS + i, 4), &ah.unwrap(), i as u64), "dat_ib_post_send_ud from the hub");
    }
    for (ep, ah) in &to_hub {
        let i = peers.iter().position(|p| p == ep).unwrap();
        ok(send_ud(&rig, *ep, &seg(2 * PEERS + i, 4), ah, i as u64), "dat_ib_post_send_ud to the hub");
    }
    let (mut sent, mut heard) = (0, BTreeSet::new());
    while sent < 2 * PEERS || heard.len() < PEERS {
        let e = rig.next(hub_dto);
        assert_eq!(e.event_number, DAT_IB_DTO_EVENT as DAT_EVENT_NUMBER);
        // SAFETY: a DTO completion's data.
        let dto = unsafe { e.event_data.dto_completion_event_data };
        assert_eq!(dto.status, DAT_DTO_SUCCESS);
        let x = ext(&e);
        match x.type_ {
            DAT_IB_UD_SEND => {
                assert_eq!(dto.operation, DAT_IB_DTO_SEND_UD as DAT_DTOS);
                sent += 1;
            }
            DAT_IB_UD_RECV => {
                assert_eq!((dto.operation, dto.transfered_length), (DAT_IB_DTO_RECV_UD as DAT_DTOS, (GRH + 4) as u32));
                let at = cookie(&dto) as usize * slot + GRH;
                let from = u32::from_be_bytes(mem[at..at + 4].try_into().unwrap()) as usize;
                assert_eq!(remote_ah(&x).qpn, peer_qpns[from], "the receive names the sender's QP");
                assert!(heard.insert(from), "peer {from}'s message delivered twice");
            }
            other => panic!("unexpected extension record {other}"),
        }
        if sent == PEERS && heard.len() == PEERS {
            break;
        }
    }
    let mut peers_heard = BTreeSet::new();
    while peers_heard.len() < PEERS || sent < 2 * PEERS {
        let e = rig.next(peer_dto);
        // SAFETY: a DTO completion's data.
        let dto = unsafe { e.event_data.dto_completion_event_data };
        assert_eq!(dto.status, DAT_DTO_SUCCESS);
        if ext(&e).type_ == DAT_IB_UD_SEND {
            sent += 1;
            continue;
        }
        let at = cookie(&dto) as usize * slot + GRH;
        let index = u32::from_be_bytes(mem[at..at + 4].try_into().unwrap()) as usize;
        let peer = peers.iter().position(|p| *p == dto.ep_handle).unwrap();
        assert_eq!(index, peer, "the hub's message to peer {peer} reached it");
        assert!(peers_heard.insert(peer), "peer {peer} heard twice");
    }
    assert!(rig.empty(hub_dto) && rig.empty(peer_dto), "nothing delivered twice");
    for ah in &to_peer {
        ok(ah_free(&rig, hub, &ah.unwrap()), "dat_ib_ud_ah_free");
    }
    assert_eq!(ty(send_ud(&rig, hub, &seg(2 * PEERS, 4), &to_peer[0].unwrap(), 0)), DAT_INVALID_PARAMETER);
}
