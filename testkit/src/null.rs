//! A backend that does nothing but hand back one completion per post, so
//! that what the benches measure is the DAT layer itself.

use udat_core::backend::*;
use udat_core::types::*;
use udat_core::*;

#[derive(Debug, Default)]
pub struct NullBackend {
    tag: u64,
    pending: u64,
}

pub const NAME: &[u8] = b"null0";

impl ConnectionManager for NullBackend {
    type Ia = ();
    type Qp = ();
    type Listener = ();
    type ConnReq = ();

    fn listen(&mut self, _ia: &mut (), _q: u64, _t: u64) -> DatResult<()> {
        Ok(())
    }
    fn unlisten(&mut self, _l: ()) {}
    fn connect(&mut self, _qp: &mut (), _r: &IaAddress, _q: u64, _p: &[u8], _t: Option<u64>) -> DatResult<()> {
        Ok(())
    }
    fn accept(&mut self, _r: &mut (), _qp: &mut (), _p: &[u8]) -> DatResult<()> {
        Ok(())
    }
    fn reject(&mut self, _r: (), _private_data: &[u8]) {}
    fn disconnect(&mut self, _qp: &mut (), _g: bool) {}
    fn poll_cm(&mut self, _ia: &mut ()) -> Option<CmEvent<()>> {
        None
    }
}

impl Control for NullBackend {
    type Ia = ();
    type Pd = ();
    type Mr = ();

    fn ia_open(&mut self, _name: &[u8]) -> DatResult<((), IaAttr)> {
        Ok((
            (),
            IaAttr {
                adapter_name: [0; 32],
                vendor_name: [0; 32],
                hardware_version_major: 0,
                hardware_version_minor: 0,
                firmware_version_major: 0,
                firmware_version_minor: 0,
                ia_address: IaAddress::default(),
                max_eps: u32::MAX,
                max_dto_per_ep: u32::MAX,
                max_rdma_read_per_ep_in: 16,
                max_rdma_read_per_ep_out: 16,
                max_evds: u32::MAX,
                max_evd_qlen: u32::MAX,
                max_iov_segments_per_dto: 16,
                max_lmrs: u32::MAX,
                max_lmr_block_size: u64::MAX,
                max_lmr_virtual_address: u64::MAX,
                max_pzs: u32::MAX,
                max_message_size: u32::MAX,
                max_rdma_size: u32::MAX,
                max_rmrs: u32::MAX,
                max_srqs: u32::MAX,
                max_recv_per_srq: u32::MAX,
                max_private_data_size: 196,
                qos_supported: Qos::BEST_EFFORT,
                rmr_supported: true,
                srq_ep_pz_difference_supported: true,
                local_read_implied: false,
                atomics: false,
                ud: false,
            },
        ))
    }
    fn ia_close(&mut self, _ia: ()) {}
    fn pd_alloc(&mut self, _ia: &mut ()) -> DatResult<()> {
        Ok(())
    }
    fn pd_free(&mut self, _pd: ()) {}
    fn mr_register(&mut self, _pd: &(), address: u64, length: u64, _p: MemPriv) -> DatResult<Registration<()>> {
        Ok(Registration { mr: (), lkey: 1, rkey: 2, address, length })
    }
    fn mr_deregister(&mut self, _mr: ()) {}
}

impl Backend for NullBackend {
    type Ia = ();
    type Pd = ();
    type Mr = ();
    type Mw = ();
    type Cq = ();
    type Qp = ();
    type Kept = ();
    type Srq = ();
    type Ah = ();
    type Cm = Self;
    type Control = Self;

    fn cm(&mut self) -> &mut Self {
        self
    }

    fn cm_qp(qp: &mut ()) -> &mut () {
        qp
    }

    fn control(&mut self) -> &mut Self {
        self
    }

    fn mw_alloc(&mut self, _pd: &()) -> DatResult<()> {
        Ok(())
    }
    fn mw_free(&mut self, _mw: ()) {}
    fn cq_create(&mut self, _ia: &mut (), _n: u32, _tag: u64) -> DatResult<()> {
        Ok(())
    }
    fn cq_resize(&mut self, _cq: &mut (), _n: u32) -> DatResult<()> {
        Ok(())
    }
    fn cq_destroy(&mut self, _cq: ()) {}
    fn cq_poll(&mut self, _cq: &mut (), _qps: &mut impl Qps<()>, out: &mut [Completion]) -> usize {
        let n = (self.pending as usize).min(out.len());
        for c in &mut out[..n] {
            *c = Completion { tag: self.tag, ..Completion::EMPTY };
        }
        self.pending -= n as u64;
        n
    }
    fn qp_create(&mut self, _c: &QpConfig<'_, Self>, tag: u64) -> DatResult<()> {
        self.tag = tag;
        Ok(())
    }
    fn qp_destroy(&mut self, _qp: (), _: &mut impl Cqs<()>) {}
    fn qp_reset(&mut self, _qp: &mut (), _: &mut impl Cqs<()>) -> DatResult<()> {
        Ok(())
    }
    fn post_send(&mut self, _qp: &mut (), _wr: &SendWr<'_>) -> DatResult<()> {
        self.pending += 1;
        Ok(())
    }
    fn post_one(&mut self, _qp: &mut (), _op: RequestOp, _sge: Sge, _cookie: u64, _flags: CompletionFlags) -> bool {
        self.pending += 1;
        true
    }
    fn cq_lane<G: HoldsQp<()>>(
        &mut self,
        _cq: &mut (),
        accept: impl FnOnce(CqHead) -> Option<G>,
    ) -> Result<(Completion, G), Untaken> {
        if self.pending == 0 {
            return Err(Untaken::Empty);
        }
        let c = Completion { tag: self.tag, ..Completion::EMPTY };
        let accepted = accept(CqHead::new(c.tag, c.op.is_recv())).ok_or(Untaken::Declined)?;
        self.pending -= 1;
        Ok((c, accepted))
    }
    fn post_recv(&mut self, _qp: &mut (), _s: &[Sge], _c: u64) -> DatResult<()> {
        Ok(())
    }
    fn post_bind(
        &mut self,
        _qp: &mut (),
        _mw: &mut (),
        _mr: Option<&()>,
        _s: Sge,
        _p: MemPriv,
        _c: u64,
        _f: CompletionFlags,
    ) -> DatResult<u32> {
        Ok(0)
    }
    fn srq_create(&mut self, _pd: &(), _a: &SrqAttr) -> DatResult<()> {
        Ok(())
    }
    fn srq_resize(&mut self, _s: &mut (), _n: u32) -> DatResult<()> {
        Ok(())
    }
    fn srq_destroy(&mut self, _s: ()) {}
    fn srq_post_recv(&mut self, _s: &mut (), _g: &[Sge], _c: u64) -> DatResult<()> {
        Ok(())
    }
    fn now_us(&mut self) -> u64 {
        0
    }
    fn block(&mut self, _ia: &mut (), _: &mut impl Cqs<()>, _t: Option<u64>) -> Wake {
        Wake::Interrupted
    }
}
