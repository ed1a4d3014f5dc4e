//! The transports a provider name can select, and how each blocks.

use udat_core::{Backend, DatResult};
use udat_verbs::Verbs;

use crate::capacity::Capacity;

/// A transport the C ABI can open.
pub trait Transport: Backend + Sized + 'static {
    /// What `dat_ia_query` names the transport in use (the provider
    /// attribute `UDAT_TRANSPORT`).
    const NAME: &'static core::ffi::CStr;

    /// A backend for this transport, with room for what `capacity` counts.
    fn create(capacity: &Capacity) -> DatResult<Self>;

    /// Whether `device` names a device of this transport that can be
    /// opened: a name that cannot is not registered at all.
    fn knows(device: &str) -> bool;
}

/// The software mlx5 HCA behind udat's own mlx5 data path, in-process:
/// only with the `softhca` feature (tests, examples, benches).
#[cfg(feature = "softhca")]
pub type SoftHca = udat_mlx5::Mlx5<udat_softhca::SoftHca, crate::capacity::QueueHeap>;

/// udat's mlx5 data path on a ConnectX, its queues made by rdma-core:
/// only with the `connectx` feature.
#[cfg(feature = "connectx")]
pub type ConnectX = udat_mlx5::Mlx5<udat_connectx::ConnectX, crate::capacity::QueueHeap>;

impl Transport for Verbs {
    const NAME: &'static std::ffi::CStr = c"verbs";

    fn create(_: &Capacity) -> DatResult<Self> {
        Ok(Verbs::new())
    }

    /// A verbs device present now (`rxe0`, or `rxe0:1` for a port).
    fn knows(device: &str) -> bool {
        let device = device.split_once(':').map_or(device, |(d, _)| d);
        verbs_devices().iter().any(|d| d == device)
    }
}

#[cfg(feature = "softhca")]
impl Transport for SoftHca {
    const NAME: &'static std::ffi::CStr = c"softhca";

    fn create(capacity: &Capacity) -> DatResult<Self> {
        Ok(udat_mlx5::Mlx5::with_storage(udat_softhca::SoftHca::new(), crate::capacity::QueueHeap(*capacity)))
    }

    /// The software HCA's IA names: `mlx5_soft` and a digit.
    fn knows(device: &str) -> bool {
        matches!(device.as_bytes().strip_prefix(udat_softhca::IA_NAME_PREFIX), Some([d]) if d.is_ascii_digit())
    }
}

#[cfg(feature = "connectx")]
impl Transport for ConnectX {
    const NAME: &'static std::ffi::CStr = c"mlx5";

    fn create(capacity: &Capacity) -> DatResult<Self> {
        Ok(udat_mlx5::Mlx5::with_storage(udat_connectx::ConnectX::new(), crate::capacity::QueueHeap(*capacity)))
    }

    /// A verbs device present now that the kernel's mlx5 driver runs.
    fn knows(device: &str) -> bool {
        Verbs::knows(device) && is_mlx5(device)
    }
}

/// The names of the verbs devices present.
pub fn verbs_devices() -> Vec<String> {
    let mut names = Vec::new();
    let mut n = 0;
    // SAFETY: rdma-core returns a null-terminated list of `n` devices,
    // owned until ibv_free_device_list; each name is NUL-terminated.
    unsafe {
        let list = udat_verbs::sys::ibv_get_device_list(&mut n);
        if !list.is_null() {
            for i in 0..n.max(0) as usize {
                let name = std::ffi::CStr::from_ptr(udat_verbs::sys::ibv_get_device_name(*list.add(i)));
                names.push(name.to_string_lossy().into_owned());
            }
            udat_verbs::sys::ibv_free_device_list(list);
        }
    }
    names
}

/// Whether the verbs device `device` (`mlx5_0`, or `mlx5_0:1` for a port)
/// is driven by the kernel's mlx5 driver, as its sysfs entry says.
pub fn is_mlx5(device: &str) -> bool {
    let device = device.split_once(':').map_or(device, |(d, _)| d);
    if device.is_empty() || device.contains('/') || device.starts_with('.') {
        return false;
    }
    std::fs::read_link(format!("/sys/class/infiniband/{device}/device/driver"))
        .is_ok_and(|driver| driver.file_name().is_some_and(|n| n == "mlx5_core"))
}

/// Which transport a registration asked for: the first word of its
/// `ia_params` (`"verbs rxe0"`, `"mlx5 mlx5_0"`, `"softhca mlx5_soft0"`,
/// `"auto mlx5_0"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// udat-verbs on any HCA or soft-RoCE.
    Verbs,
    /// udat's mlx5 direct path on a ConnectX, and only there.
    Mlx5,
    /// udat's mlx5 data path on the software HCA.
    SoftHca,
    /// The best transport the device has; `dat_ia_query` says which.
    Auto,
}

/// What a registration's `ia_params` ask for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params<'a> {
    pub kind: Kind,
    pub device: &'a str,
    /// The defaults with the `key=value` words after the device applied.
    pub capacity: Capacity,
}

/// `ia_params`: the transport, the device, then any capacities
/// (`"verbs rxe0 eps=100000"`).
pub fn parse(params: &str) -> Option<Params<'_>> {
    let mut words = params.split_whitespace();
    let kind = match words.next()? {
        "verbs" => Kind::Verbs,
        "mlx5" => Kind::Mlx5,
        "softhca" => Kind::SoftHca,
        "auto" => Kind::Auto,
        _ => return None,
    };
    let device = words.next()?;
    let capacity = Capacity::default().with(words).ok()?;
    Some(Params { kind, device, capacity })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_name_transport_and_device() {
        let kd = |p: &str| parse(p).map(|p| (p.kind, p.device.to_string()));
        assert_eq!(kd("verbs rxe0"), Some((Kind::Verbs, "rxe0".into())));
        assert_eq!(kd(" softhca  mlx5_soft1 "), Some((Kind::SoftHca, "mlx5_soft1".into())));
        assert_eq!(kd("mlx5 mlx5_0:2"), Some((Kind::Mlx5, "mlx5_0:2".into())));
        assert_eq!(kd("auto rxe0"), Some((Kind::Auto, "rxe0".into())));
        assert_eq!(parse("verbs"), None);
        assert_eq!(parse("ofa v0 0"), None);
        assert_eq!(parse("verbs rxe0 extra"), None);
    }

    #[test]
    fn params_after_the_device_set_capacities() {
        let p = parse("verbs rxe0 eps=100000 events=9").unwrap();
        assert_eq!((p.capacity.eps, p.capacity.events), (100_000, 9));
        assert_eq!(p.capacity.lmrs, Capacity::default().lmrs);
        assert_eq!(parse("verbs rxe0 eps=0"), None);
    }
}

#[cfg(test)]
mod sysfs {
    #[test]
    fn a_name_that_is_no_device_is_not_mlx5() {
        for name in ["", "../../..", ".", "no_such_device0", "mlx5_soft0"] {
            assert!(!super::is_mlx5(name), "{name}");
        }
    }
}
