//! Shared Receive Queue (SRQ): dat_srq_create(3DAT), dat_srq_free(3DAT),
//! dat_srq_post_recv(3DAT), dat_srq_query(3DAT), dat_srq_resize(3DAT),
//! dat_srq_set_lw(3DAT).

use crate::backend::Backend;
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::handle::{IaHandle, PzHandle, SrqHandle};
use crate::object::srq::Srq;
use crate::provider::Provider;
use crate::signature::signature;
use crate::storage::Storage;
use crate::types::SrqAttr;

/// `DAT_SRQ_FIELD_ALL`.
pub const SRQ_FIELD_ALL: u32 = 0xff;

/// `DAT_SRQ_PARAM`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqParam {
    /// The IA the SRQ belongs to.
    pub ia: IaHandle,
    /// The SRQ's PZ.
    pub pz: PzHandle,
    /// Most receives posted at once.
    pub max_recv_dtos: u32,
    /// Most segments in one receive.
    pub max_recv_iov: u32,
    /// The low watermark of posted receives (dat_srq_set_lw(3DAT)).
    pub low_watermark: u32,
    /// Buffers not yet taken by an EP: `DAT_VALUE_UNKNOWN`, as the
    /// transport does not say when an EP takes one.
    pub available_dto_count: u32,
    /// Buffers posted and not yet completed.
    pub outstanding_dto_count: u32,
}

signature! {
    /// dat_srq_create(3DAT)'s parameters.
    pub(crate) enum SrqCreate { IaHandle, PzHandle, SrqAttr, SrqHandle }

    /// dat_srq_query(3DAT)'s parameters.
    pub(crate) enum SrqQuery { SrqHandle, SrqParamMask, SrqParam }

    /// dat_srq_resize(3DAT)'s parameters.
    pub(crate) enum SrqResize { SrqHandle, SrqMaxRecvDto }

    /// dat_srq_set_lw(3DAT)'s parameters.
    pub(crate) enum SrqSetLw { SrqHandle, LowWatermark }
}

impl<B: Backend, S: Storage> Provider<B, S> {
    /// dat_srq_create(3DAT). "The Consumer must set low_watermark to
    /// DAT_SRQ_LW_DEFAULT" (0).
    pub fn srq_create(&mut self, ia_h: IaHandle, pz_h: PzHandle, attr: &SrqAttr) -> DatResult<SrqHandle> {
        let ia = self.ia(ia_h)?;
        let limits = ia.attr;
        self.pz_of(ia_h, pz_h)?;
        if attr.max_recv_dtos == 0
            || attr.max_recv_dtos > limits.max_recv_per_srq
            || attr.max_recv_iov > limits.max_iov_segments_per_dto
            || attr.low_watermark != 0
        {
            return Err(DatError::invalid(SrqCreate::SrqAttr));
        }
        let Provider { pzs, backend, .. } = self;
        let pd = &pzs.get(pz_h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandlePz))?.pd;
        let srq = backend.srq_create(pd, attr)?;
        let obj = Srq { ia: ia_h, pz: pz_h, srq, attr: *attr, ep_refs: 0, outstanding: 0, context: 0 };
        match crate::object::owned::insert(&mut self.ias, &mut self.srqs, obj) {
            Ok(raw) => {
                self.pz_hold(pz_h);
                Ok(SrqHandle(raw))
            }
            Err(obj) => {
                self.backend.srq_destroy(obj.srq);
                Err(DatError::new(ErrorType::InsufficientResources, Subtype::ResourceSrq))
            }
        }
    }

    /// dat_srq_free(3DAT): "The SRQ cannot be destroyed if it is in use by
    /// an EP" (`DAT_SRQ_IN_USE`, the invalid-state subtype of DAT 2.0).
    pub fn srq_free(&mut self, srq: SrqHandle) -> DatResult<()> {
        if self.srq(srq)?.ep_refs != 0 {
            return Err(DatError::invalid_state(Subtype::InvalidStateSrqInUse));
        }
        self.srq_destroy(srq);
        Ok(())
    }

    pub(crate) fn srq_destroy(&mut self, srq: SrqHandle) {
        if let Some(s) = crate::object::owned::remove(&mut self.ias, &mut self.srqs, srq.0) {
            self.backend.srq_destroy(s.srq);
            self.pz_release(s.pz);
        }
    }

    /// dat_srq_query(3DAT).
    pub fn srq_query(&self, h: SrqHandle, mask: u32) -> DatResult<SrqParam> {
        let s = self.srq(h)?;
        if mask & !SRQ_FIELD_ALL != 0 {
            return Err(DatError::invalid(SrqQuery::SrqParamMask));
        }
        Ok(SrqParam {
            ia: s.ia,
            pz: s.pz,
            max_recv_dtos: s.attr.max_recv_dtos,
            max_recv_iov: s.attr.max_recv_iov,
            low_watermark: s.attr.low_watermark,
            available_dto_count: super::ep::VALUE_UNKNOWN,
            outstanding_dto_count: s.outstanding,
        })
    }

    /// dat_srq_resize(3DAT): never below the outstanding receives or the
    /// low watermark (`DAT_INVALID_STATE`).
    pub fn srq_resize(&mut self, h: SrqHandle, max_recv_dtos: u32) -> DatResult<()> {
        let s = self.srq(h)?;
        let limit = self.ia(s.ia)?.attr.max_recv_per_srq;
        if max_recv_dtos == 0 || max_recv_dtos > limit {
            return Err(DatError::invalid(SrqResize::SrqMaxRecvDto));
        }
        if max_recv_dtos < s.outstanding || max_recv_dtos < s.attr.low_watermark {
            return Err(DatError::invalid_state(Subtype::NoSubtype));
        }
        let Provider { srqs, backend, .. } = self;
        let s = srqs.get_mut(h.0).ok_or(DatError::invalid_handle(Subtype::InvalidHandleSrq))?;
        backend.srq_resize(&mut s.srq, max_recv_dtos)?;
        s.attr.max_recv_dtos = max_recv_dtos;
        Ok(())
    }

    /// dat_srq_set_lw(3DAT): `DAT_INVALID_PARAMETER` above `max_recv_dtos`;
    /// otherwise `DAT_MODEL_NOT_SUPPORTED`, as the transports udat drives do
    /// not tell when an EP takes a buffer from the SRQ.
    pub fn srq_set_lw(&mut self, h: SrqHandle, low_watermark: u32) -> DatResult<()> {
        let s = self.srq(h)?;
        if low_watermark > s.attr.max_recv_dtos {
            return Err(DatError::invalid(SrqSetLw::LowWatermark));
        }
        Err(DatError::of(ErrorType::ModelNotSupported))
    }
}
