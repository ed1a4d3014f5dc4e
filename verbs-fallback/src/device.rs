//! An open device: the verbs context rdma_cm uses for it, the completion
//! channel every CQ reports to, and its connection manager, whose thread
//! owns the rdma_cm event channel (`progress`).

use std::cell::RefCell;
use std::ffi::CStr;
use std::rc::Rc;

use udat_core::{
    backend::{WaitFds, Wake},
    types::{IaAddress, IaAttr, Qos},
    DatError, DatResult, ErrorType,
};

use crate::addr;
use crate::cq::CqShared;
use crate::device_error::{self, DeviceErrors};
use crate::fd::nonblocking;
use crate::progress::{CmShared, Progress};
use crate::status::{check, errno};
use crate::sys;
use crate::tunables::Tunables;

/// An open device. A clone is another handle on the same device, which
/// closes when the last handle goes.
#[derive(Clone)]
pub struct Ia(pub(crate) Rc<IaShared>);

impl Ia {
    /// The completion channel's descriptor, the connection manager's
    /// eventfd (readable while it holds finished connection events) and
    /// the IA's device-error flag (readable while a device error may be
    /// its own): what [`Backend::block`](udat_core::Backend::block) sleeps on. A
    /// caller that must not hold its own lock while it sleeps, or an event
    /// loop, polls these itself, after a `block` with a zero timeout has
    /// armed the CQs.
    pub fn wait_fds(&self) -> WaitFds {
        // SAFETY: the channel is open while the IA is.
        unsafe { WaitFds([(*self.0.comp).fd, self.0.cm().ready_fd(), self.0.errors.fd(), -1]) }
    }

    /// Whether the IA's thread has finished a connection event, or a
    /// device error came that may be the IA's, which the core has not
    /// taken: what [`Backend::cm_waiting`](udat_core::Backend::cm_waiting)
    /// answers. Two atomic loads, and nothing changes.
    #[inline(always)]
    pub fn cm_waiting(&self) -> bool {
        self.0.cm().pending() || self.0.errors.came()
    }
}

pub(crate) struct IaShared {
    /// The connection manager and its thread, stopped first when the IA
    /// closes.
    cm: Progress,
    /// The device's context as librdmacm opened it: QPs on rdma_cm ids
    /// must live on this very context.
    pub ctx: *mut sys::ibv_context,
    list: *mut *mut sys::ibv_context,
    pub port: u8,
    pub address: IaAddress,
    /// The index of `address`'s GID: where the UD datagrams a passive side
    /// sends leave from.
    pub gid_index: u8,
    pub comp: *mut sys::ibv_comp_channel,
    pub device: sys::ibv_device_attr,
    /// The CQs reporting to `comp`, for blocking waits.
    pub cqs: RefCell<Vec<Rc<CqShared>>>,
    /// The QPs and CQs whose device errors this IA reports.
    pub errors: DeviceErrors,
}

/// Requests carry at most 56 bytes of private data over the IB CM (92
/// bytes of REQ private data less rdma_cm's 36-byte header), the
/// smallest limit of connect, accept (196) and reject (148).
const MAX_PRIVATE_DATA: u32 = 56;

impl IaShared {
    /// Open `name`: a device name (`rxe0`, `mlx5_0`), optionally followed
    /// by `:port`.
    pub fn open(name: &[u8]) -> DatResult<(IaShared, IaAttr)> {
        let not_found = DatError::of(ErrorType::ProviderNotFound);
        let name = std::str::from_utf8(name).map_err(|_| not_found)?;
        let (device, port) = match name.split_once(':') {
            Some((d, p)) => (d, p.parse::<u8>().map_err(|_| not_found)?),
            None => (name, 1),
        };
        let mut count = 0;
        // SAFETY: rdma_get_devices writes the count and returns a
        // null-terminated array it owns until rdma_free_devices.
        let list = unsafe { sys::rdma_get_devices(&mut count) };
        if list.is_null() {
            return Err(not_found);
        }
        let ctx = (0..count.max(0) as usize)
            // SAFETY: `list` has `count` entries.
            .map(|i| unsafe { *list.add(i) })
            .find(|&ctx| {
                // SAFETY: each entry is an open context with a device whose
                // name is a NUL-terminated string.
                let n = unsafe { CStr::from_ptr(sys::ibv_get_device_name((*ctx).device)) };
                n.to_bytes() == device.as_bytes()
            });
        // The connection manager's thread reads the context's asynchronous
        // events from the start: its descriptor never blocks (`watch`).
        let made = ctx.ok_or(not_found).and_then(|ctx| {
            // SAFETY: `ctx` is an open context of the list.
            unsafe { device_error::watch(ctx) };
            Ok((ctx, Progress::start(ctx)?, DeviceErrors::new(ctx)?))
        });
        let (ctx, cm, errors) = match made {
            Ok(made) => made,
            Err(e) => {
                // SAFETY: the list came from rdma_get_devices.
                unsafe { sys::rdma_free_devices(list) };
                return Err(e);
            }
        };
        let mut ia = IaShared {
            cm,
            ctx,
            list,
            port,
            address: IaAddress::default(),
            gid_index: 0,
            comp: std::ptr::null_mut(),
            // SAFETY: a plain C struct of integers.
            device: unsafe { std::mem::zeroed() },
            cqs: RefCell::new(Vec::new()),
            errors,
        };
        // SAFETY: `ctx` is open; the attribute struct is ours to fill.
        check(unsafe { sys::ibv_query_device(ctx, &mut ia.device) })?;
        // SAFETY: a plain C struct of integers.
        let mut port_attr: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: `ctx` is open; the compat call fills the leading fields
        // of ibv_port_attr, the ones read here.
        check(unsafe { sys::ibv_query_port(ctx, port, (&raw mut port_attr).cast()) })?;
        (ia.address, ia.gid_index) =
            ipv4_gid(ctx, port, port_attr.gid_tbl_len).ok_or(DatError::of(ErrorType::InvalidAddress))?;
        // SAFETY: `ctx` is open.
        ia.comp = unsafe { sys::ibv_create_comp_channel(ctx) };
        if ia.comp.is_null() {
            return Err(crate::status::dat_error(errno()));
        }
        // SAFETY: the channel is open; its fd is its own.
        unsafe { nonblocking((*ia.comp).fd) };
        // Read once, before any connection: OFA's `DAPL_*` variables.
        let rxe = ia.rxe();
        ia.cm.cm().lock().tunables = Tunables::from_env(ia.device.local_ca_ack_delay, rxe);
        let attr = ia.attr(&port_attr, device);
        Ok((ia, attr))
    }

    fn attr(&self, port: &sys::ibv_port_attr, device: &str) -> IaAttr {
        let d = &self.device;
        let positive = |v: i32| v.max(0) as u32;
        let mut adapter_name = [0; 32];
        let n = device.len().min(31);
        adapter_name[..n].copy_from_slice(&device.as_bytes()[..n]);
        let mut vendor_name = [0; 32];
        vendor_name[..4].copy_from_slice(b"udat");
        IaAttr {
            adapter_name,
            vendor_name,
            hardware_version_major: d.hw_ver,
            hardware_version_minor: 0,
            firmware_version_major: 0,
            firmware_version_minor: 0,
            ia_address: self.address,
            max_eps: positive(d.max_qp),
            max_dto_per_ep: positive(d.max_qp_wr),
            max_rdma_read_per_ep_in: positive(d.max_qp_rd_atom),
            max_rdma_read_per_ep_out: positive(d.max_qp_init_rd_atom),
            max_evds: positive(d.max_cq),
            max_evd_qlen: positive(d.max_cqe),
            max_iov_segments_per_dto: positive(d.max_sge).min(udat_core::backend::MAX_SGE as u32),
            max_lmrs: positive(d.max_mr),
            max_lmr_block_size: d.max_mr_size,
            max_lmr_virtual_address: u64::MAX,
            max_pzs: positive(d.max_pd),
            max_message_size: port.max_msg_sz,
            max_rdma_size: port.max_msg_sz,
            max_rmrs: positive(d.max_mw),
            max_srqs: positive(d.max_srq),
            max_recv_per_srq: positive(d.max_srq_wr),
            max_private_data_size: MAX_PRIVATE_DATA,
            qos_supported: Qos::BEST_EFFORT,
            rmr_supported: self.has_memory_windows(),
            srq_ep_pz_difference_supported: false,
            local_read_implied: true,
            atomics: d.atomic_cap != sys::ibv_atomic_cap::IBV_ATOMIC_NONE,
            // UD through `ibv_create_ah`, `wr.ud` and rdma_cm's
            // RDMA_PS_UDP (`cm`).
            ud: true,
        }
    }

    /// The connection manager.
    pub fn cm(&self) -> &CmShared {
        self.cm.cm()
    }

    /// The next device error of the IA's objects, port or device.
    pub fn device_error<R>(&self) -> Option<udat_core::backend::CmEvent<R>> {
        self.errors.poll(self.port)
    }

    /// The QP at `qp`, of this IA, is about to be destroyed: its events are
    /// read, and forgotten.
    pub fn qp_going(&self, qp: *mut sys::ibv_qp) {
        self.errors.unname_qp(qp);
        // SAFETY: the context is open; the QP is on it.
        unsafe { device_error::qp_going(self.ctx, qp) };
    }

    /// Sleep until the completion channel is readable, the connection
    /// manager has finished an event, a device error may be this IA's, or
    /// `timeout_us` passes; and whether the completion channel is
    /// readable.
    pub fn sleep(&self, timeout_us: Option<u64>) -> (Wake, bool) {
        // SAFETY: the channel is open while the IA is.
        let mut fds = unsafe {
            [
                libc::pollfd { fd: (*self.comp).fd, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: self.cm().ready_fd(), events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: self.errors.fd(), events: libc::POLLIN, revents: 0 },
            ]
        };
        // Round up, so a wait never returns before its time.
        let ms = timeout_us.map_or(-1, |us| us.div_ceil(1000).min(i32::MAX as u64) as i32);
        // SAFETY: `fds` is a valid array of its length.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if rc < 0 {
            let wake = if errno() == libc::EINTR { Wake::Interrupted } else { Wake::Activity };
            return (wake, false);
        }
        let completions = fds[0].revents & libc::POLLIN != 0;
        (if rc == 0 { Wake::Timeout } else { Wake::Activity }, completions)
    }

    /// Whether the device binds type 1 memory windows (`IBV_DEVICE_MEM_WINDOW`).
    pub fn has_memory_windows(&self) -> bool {
        self.device.max_mw > 0 && self.device.device_cap_flags & sys::ibv_device_cap_flags::IBV_DEVICE_MEM_WINDOW != 0
    }

    /// Whether udat offers remote invalidation and windows of an EP here
    /// (`dat_ep_post_send_with_invalidate`, `dat_rmr_create_for_ep`).
    /// Soft-RoCE (vendor `0xffffff`) binds type 2 windows, but a receive
    /// that a send with invalidate consumed completes without the
    /// invalidation, the invalidation of a region's key succeeds, and a
    /// window invalidated by its own EP refuses its next bind (the
    /// transport suite on rxe): DAT's rules do not hold, so udat refuses
    /// both calls there with `DAT_MODEL_NOT_SUPPORTED`.
    pub fn remote_invalidation(&self) -> bool {
        !self.rxe()
    }

    /// Whether the device is soft-RoCE's (vendor `0xffffff`), whose queues
    /// posts and polls may reach in place (`rxe`).
    pub(crate) fn rxe(&self) -> bool {
        self.device.vendor_id == RXE_VENDOR_ID
    }
}

/// `RXE_VENDOR_ID` of the kernel's rdma_rxe.
const RXE_VENDOR_ID: u32 = 0x00ff_ffff;

impl Drop for IaShared {
    /// The connection manager's thread stops first; its ids and channel
    /// go with it (`Progress`), then the completion channel and the
    /// device list.
    fn drop(&mut self) {
        self.cm.stop();
        self.cqs.borrow_mut().clear();
        // SAFETY: every object on the channel is gone (they hold an Rc to
        // this IA); the device list came from rdma_get_devices.
        unsafe {
            if !self.comp.is_null() {
                sys::ibv_destroy_comp_channel(self.comp);
            }
            sys::rdma_free_devices(self.list);
        }
    }
}

/// The first IPv4-mapped GID of the port, the address rdma_cm binds to,
/// and its index.
fn ipv4_gid(ctx: *mut sys::ibv_context, port: u8, gids: i32) -> Option<(IaAddress, u8)> {
    (0..gids).find_map(|index| {
        // SAFETY: a union of plain bytes.
        let mut gid: sys::ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: `ctx` is open and `gid` ours to fill.
        if unsafe { sys::ibv_query_gid(ctx, port, index, &mut gid) } != 0 {
            return None;
        }
        // SAFETY: every bit pattern of the union is a valid byte array.
        let raw = unsafe { gid.raw };
        let mapped = raw[..10].iter().all(|&b| b == 0) && raw[10..12] == [0xff, 0xff];
        let index = u8::try_from(index).ok()?;
        mapped.then(|| (addr::ipv4([raw[12], raw[13], raw[14], raw[15]], 0), index))
    })
}
