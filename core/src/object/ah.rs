//! The state of a UD address handle of the IB extension
//! (`<dat2/dat_ib_extensions.h>`); the calls on it are in `crate::call::ud`.

use crate::backend::{Backend, PrivateData};
use crate::handle::EpHandle;
use crate::types::IaAddress;

/// One peer of a UD EP, resolved by a connect or an accept: the transport's
/// address handle, the peer's Q_Key, and what the peer sent. (The peer's
/// QP number travels in the consumer's `DAT_IB_ADDR_HANDLE`.)
pub(crate) struct Ah<B: Backend> {
    /// The UD EP whose connection resolved it: only that EP sends through
    /// it, and freeing the EP frees it.
    pub(crate) ep: EpHandle,
    pub(crate) ah: B::Ah,
    pub(crate) qkey: u32,
    /// The peer's IA address (`DAT_IB_ADDR_HANDLE`'s `ia_addr`).
    pub(crate) remote: IaAddress,
    /// The private data of the connection event that carried the handle,
    /// valid until the handle is freed.
    pub(crate) private_data: PrivateData,
    /// Whether the connection's CM object is still held
    /// (`dat_ib_ud_cm_free` releases it).
    pub(crate) cm_held: bool,
}
