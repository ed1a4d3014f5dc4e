//! The transports a provider name can select, and how each blocks.

use udat_core::DatResult;
use udat_mlx5::Mlx5;
use udat_mlx5_model::SoftHca;
use udat_verbs::Verbs;

use crate::instance::Transport;

/// The software mlx5 HCA behind udat's own mlx5 data path, in-process.
pub type Model = Mlx5<SoftHca>;

impl Transport for Verbs {
    fn create() -> DatResult<Self> {
        Ok(Verbs::new())
    }

    fn wait_fds(ia: &udat_verbs::Ia) -> Option<[libc::c_int; 2]> {
        Some(ia.wait_fds())
    }
}

impl Transport for Model {
    fn create() -> DatResult<Self> {
        Ok(Mlx5::new(SoftHca::new()))
    }

    /// The model runs inside the calling thread: nothing to sleep on.
    fn wait_fds(_: &<Self as udat_core::Backend>::Ia) -> Option<[libc::c_int; 2]> {
        None
    }
}

/// Which transport a registration asked for: the first word of its
/// `ia_params` (`"verbs rxe0"`, `"mlx5 mlx5_0"`, `"model mlx5_model0"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// udat-verbs on any HCA or soft-RoCE.
    Verbs,
    /// udat's mlx5 direct path on a ConnectX.
    Mlx5,
    /// udat's mlx5 data path on the software HCA.
    Model,
}

/// `ia_params` split into transport and device.
pub fn parse(params: &str) -> Option<(Kind, &str)> {
    let mut words = params.split_whitespace();
    let kind = match words.next()? {
        "verbs" => Kind::Verbs,
        "mlx5" => Kind::Mlx5,
        "model" => Kind::Model,
        _ => return None,
    };
    let device = words.next()?;
    words.next().is_none().then_some((kind, device))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_name_transport_and_device() {
        assert_eq!(parse("verbs rxe0"), Some((Kind::Verbs, "rxe0")));
        assert_eq!(parse(" model  mlx5_model1 "), Some((Kind::Model, "mlx5_model1")));
        assert_eq!(parse("mlx5 mlx5_0:2"), Some((Kind::Mlx5, "mlx5_0:2")));
        assert_eq!(parse("verbs"), None);
        assert_eq!(parse("ofa v0 0"), None);
        assert_eq!(parse("verbs rxe0 extra"), None);
    }
}
